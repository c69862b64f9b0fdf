"""A static finding the run contradicts costs only its own check (issue 40 item 1).

The source scans name what looks like torch's attention or autograd; the run, where the sandbox
keeps the machine-code trap in place, shows whether it ran. A finding alone loses the
``forbidden.static`` points, at every sandbox level; a finding the run confirms (a trap fired, a
fingerprint matched) zeroes the file as before. An attribute assignment (``self.proj = nn.Identity()``) never makes its
object an alias of torch.
"""
import os

import pytest

from grader.checks import autograd_ban, forbidden
from grader.grading import CheckResult, GradeReport, _unconfirmed_static, grade_source

HERE = os.path.dirname(os.path.abspath(__file__))
MODULE = os.path.join(os.path.dirname(HERE), "grader", "tasks", "sdpa", "corpus", "correct", "module_own_method.py")
ALIAS_CHEAT = '''import torch
from torch import nn

ops = torch.nn.functional


class SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Identity()

    def forward(self, q, k, v, mask=None, causal=False, scale=None):
        return self.proj(ops.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=scale))


attention = SelfAttention()


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    return attention(query, key, value, attn_mask, is_causal, scale)
'''


def _module():
    with open(MODULE) as f:
        return f.read()


def test_an_attribute_assignment_aliases_nothing():
    assert forbidden.scan_source(_module()) == []
    assert autograd_ban.scan("import torch\nclass A:\n    def f(self):\n        self.g = torch.autograd\n"
                             "        self.grad = self.g\n        return self.grad(1)\n") == []
    # a name bound from torch still is torch, also when unpacked from a tuple
    assert forbidden.scan_source("import torch\nf, g = torch.nn.functional, 1\nf.scaled_dot_product_attention(1)\n")


def test_a_tutorial_module_scores_100_and_an_aliased_call_nothing():
    honest = grade_source(_module(), "sdpa", seed=3)
    assert honest.score == 100, {c.id: c.message for c in honest.checks if not c.passed}
    cheat = grade_source(ALIAS_CHEAT, "sdpa", seed=3)
    checks = {c.id: c for c in cheat.checks}
    assert cheat.score <= 5 and checks["forbidden.runtime"].details.get("detected"), cheat.to_dict()["summary"]
    assert "did not confirm" not in checks["forbidden.static"].message


UNCALLED = "\n\ndef _never_called(q):\n    return torch.nn.functional.scaled_dot_product_attention(q, q, q)\n"


def test_a_static_finding_the_run_contradicts_costs_only_its_own_check_at_every_level():
    """The same on the server and in the pre-check: the pre-check must predict the server's score."""
    scores = {}
    for level in ("auto", "local"):
        report = grade_source(_module() + UNCALLED, "sdpa", seed=3, sandbox=level)
        static = next(c for c in report.checks if c.id == "forbidden.static")
        assert not static.passed and static.details["unconfirmed_by_run"] and not static.details["detected"]
        assert "did not confirm" in static.message and "line 38" in static.message
        assert report.score == 100 - static.max_points, report.to_dict()["summary"]
        scores[level] = report.score
    assert scores["auto"] == scores["local"]


def _report(*checks):
    return GradeReport(task="sdpa", checks=[CheckResult(i, False, 0, 3, "found", {"detected": d})
                                            for i, d in checks])


@pytest.mark.parametrize("runtime, downgraded", [(False, True), (True, False)])
def test_the_rule_reads_every_run_time_forbidden_check(runtime, downgraded):
    for static in ("forbidden.static", "forbidden.autograd_source"):
        for confirming in ("forbidden.runtime", "forbidden.autograd_runtime"):
            report = _report((static, True), (confirming, runtime))
            _unconfirmed_static(report)
            assert (not report.checks[0].details["detected"]) == downgraded
            assert ("did not confirm" in report.checks[0].message) == downgraded
