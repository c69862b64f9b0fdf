"""The grader's parts on their own: tolerance, static scan, scale reading, scoring, load failures."""
import json
import math
import random

import pytest
import torch

from grader import GRADER_VERSION
from grader.checks.forbidden import forbidden_ops, scan_source
from grader.checks.scale import fit_scale, name_scale
from grader.checks.tolerance import allowance, compare
from grader.checks.variants import identify, sdpa_variants
from grader.grading import _signature_problem, grade_source
from grader.scoring import split_points, task_points as _max_points
from grader.sandbox import Limits
from grader.tasks import TASK_IDS, TASKS, TITLES
from reference_impl import scaled_dot_product_attention as ref_sdpa

CORRECT = '''
import math, torch
def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    s = query @ key.transpose(-2, -1) * (1 / math.sqrt(query.size(-1)) if scale is None else scale)
    if is_causal:
        s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else s + attn_mask
    return torch.softmax(s, -1) @ value
'''


def test_points_sum_to_100_per_task():
    for task in TASKS.values():
        assert sum(task.points.values()) == 100
        assert sum(_max_points(task).values()) == 100
        assert {"load", "forbidden", "output", "dtype", "inputs"} <= set(task.points)
        families = {c.family for c in task.checks} | {"load"}
        assert families == set(task.points), task.id  # no family without checks, no check without points
    for task_id in ("sdpa", "mha"):
        assert {"scale", "mask", "causal", "grad", "batch"} <= set(TASKS[task_id].points)
    assert {"jacobian", "scale", "mask", "causal"} <= set(TASKS["sdpa_backward"].points)
    assert {"weights", "stability"} <= set(TASKS["sdpa"].points)
    assert "heads" in TASKS["mha"].points
    assert sorted(TASKS) == sorted(TASK_IDS) and all(TITLES[t.id] == (t.title, t.function) for t in TASKS.values())
    assert split_points(10, [2, 1, 1]) == [5, 3, 2] or sum(split_points(10, [2, 1, 1])) == 10
    assert split_points(10, [1, 0, 1]) == [5, 0, 5] and split_points(0, [0]) == [0]  # a gate has no points
    assert GRADER_VERSION


def test_tolerance_nan_never_passes_and_float16_fails():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 7, 9, generator=g) for _ in range(3))
    ref64 = ref_sdpa(q.double(), k.double(), v.double())
    bound = allowance(ref64, ref_sdpa(q, k, v), torch.float32)
    assert compare(ref_sdpa(q, k, v), ref64, bound).ok
    nan_out = ref_sdpa(q, k, v).clone()
    nan_out[0, 0, 0] = float("nan")
    result = compare(nan_out, ref64, float("inf"))
    assert not result.ok and result.nonfinite == 1 and result.where == [0, 0, 0]
    half = ref_sdpa(q.half(), k.half(), v.half()).float()
    assert not compare(half, ref64, bound).ok


def test_variants_name_the_bug():
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, n, 8, generator=g, dtype=torch.float64) for n in (5, 8, 8))
    mask = torch.rand(5, 8, generator=g) < 0.6
    mask[:, 0] = True
    wrong = ref_sdpa(q, k, v, ~mask)
    ref = ref_sdpa(q, k, v, mask)
    assert identify(wrong, sdpa_variants(q, k, v, mask), 1.0) == "mask_polarity"
    assert identify(ref, sdpa_variants(q, k, v, mask), 0.0) is None


@pytest.mark.parametrize("source, flagged", [
    (CORRECT, False),
    ('"""Unlike F.scaled_dot_product_attention, written by hand."""\n' + CORRECT, False),
    ("class A:\n    def scaled_dot_product_attention(self, q):\n        return q\n"
     "def f(q):\n    return A().scaled_dot_product_attention(q)\n", False),
    ("import torch.nn.functional as F\ndef f(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v)\n", True),
    ("from torch.nn.functional import scaled_dot_product_attention as sdpa\n", True),
    ("import torch\ndef f(q):\n    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, q, q)\n", True),
    ("import torch\nn = 'scaled_' + 'dot_product_attention'\ndef f(q):\n    return getattr(torch.nn.functional, n)(q, q, q)\n", True),
    ("import importlib\nm = importlib.import_module('reference' + '_impl')\n", True),
    ("import reference_impl\n", True),
    ("import torch\nmha = torch.nn.MultiheadAttention(8, 2)\n", True),
    ("import torch\nfrom torch.overrides import TorchFunctionMode\n", True),
    ("import torch\ndef f():\n    with torch._C.DisableTorchFunction():\n        pass\n", True),
])
def test_static_scan(source, flagged):
    assert bool(scan_source(source)) == flagged


def test_runtime_forbidden_names():
    assert forbidden_ops(["aten._scaled_dot_product_flash_attention_for_cpu", "aten.bmm"])
    assert forbidden_ops(["torch.nn.functional.multi_head_attention_forward"])
    assert forbidden_ops(["module.reference_impl"])
    assert not forbidden_ops(["aten.bmm", "aten._softmax", "torch.softmax", "Tensor.masked_fill"])


def test_scale_is_read_from_weights():
    g = torch.Generator().manual_seed(2)
    found = {}
    for d in (8, 64, 512):
        q, k = torch.randn(12, d, generator=g, dtype=torch.float64), torch.randn(16, d, generator=g, dtype=torch.float64)
        dots = q @ k.T
        slope, r2, variance = fit_scale(torch.softmax(dots / math.sqrt(d), -1), dots)
        assert abs(slope * math.sqrt(d) - 1) < 1e-9 and r2 > 0.999999
        assert 0.5 < variance < 2
        found[d] = fit_scale(torch.softmax(dots, -1), dots)[0]  # no scaling
        assert abs(fit_scale(torch.softmax(dots, -2), dots)[0] - 1) < 1e-9  # wrong axis: still readable
    assert name_scale(found).startswith("no scaling")
    assert "1/d_k" in name_scale({d: 1 / d for d in (8, 64, 512)})
    assert "only right at d_k = 64" in name_scale({d: 0.125 for d in (8, 64, 512)})
    assert "d_model" in name_scale({8: 1 / math.sqrt(32), 64: 1 / math.sqrt(128)}, {8: 4, 64: 2})


def test_signature_rules():
    task = TASKS["sdpa"]
    p = lambda name, kind="POSITIONAL_OR_KEYWORD", default=False: {"name": name, "kind": kind, "has_default": default}
    ok = [p("q"), p("k"), p("v"), p("attn_mask", default=True), p("dropout_p", default=True),
          p("is_causal", default=True), p("scale", default=True)]
    assert _signature_problem(task, ok) is None
    assert _signature_problem(task, [p("q"), p("k"), p("v"), p("kw", "VAR_KEYWORD")]) is None
    assert "scale" in _signature_problem(task, ok[:4] + [p("is_causal", default=True)])
    assert "positional" in _signature_problem(task, [p("q"), p("k")])
    assert "default" in _signature_problem(task, ok + [p("extra")])


@pytest.mark.parametrize("source, needle", [
    (b"def scaled_dot_product_attention(q, k, v:\n", "cannot parse"),
    (b"# \xff\xfe not utf-8\n", "not valid UTF-8"),
])
def test_unloadable_files_score_zero_without_a_child(source, needle):
    report = grade_source(source, "sdpa", seed=1).to_dict()
    assert report["score"] == 0 and not report["passed"] and needle in report["error"]
    assert all(c["details"].get("skipped") for c in report["checks"][1:])


def _malformed_sources():
    """Sources no parser accepts, of every kind a student (or a fuzzer) can send: deep nesting of
    each construct (RecursionError, MemoryError or SyntaxError inside the parser), bytes that are
    not UTF-8, text no file can hold, NULs, broken indentation, and seeded random bytes."""
    deep = {"sum": "x = " + "+".join(["1"] * 10_000), "unary": "x = " + "-" * 10_000 + "1",
            "parens": "x = " + "(" * 5_000 + ")" * 5_000, "lists": "x = " + "[" * 5_000 + "]" * 5_000,
            "calls": "x = f" + "(" * 5_000 + ")" * 5_000, "not": "x = " + "not " * 10_000 + "y",
            "lambdas": "f = " + "lambda: " * 5_000 + "0", "power": "x = " + "**".join(["2"] * 10_000),
            "subscripts": "x = a" + "[0]" * 10_000, "fstrings": "x = " + "f'{" * 200 + "1" + "}'" * 200,
            "blocks": "".join(" " * i + "if x:\n" for i in range(200)) + " " * 200 + "pass\n"}
    out = list(deep.items())
    out += [("not utf-8", b"def f():\n    return '\xff\xfe'\n"), ("lone surrogate", "x = '\ud800'\n"),
            ("nul", b"x = 1\x00\n"), ("bom then garbage", b"\xef\xbb\xbf)("),
            ("tabs and spaces", "if x:\n\tpass\n        pass\n"), ("unterminated", "x = '''\n"),
            ("unknown cookie", b"# coding: no-such-codec\n)\n"), ("utf-16", "x = 1\n".encode("utf-16"))]
    rng = random.Random(30)
    out += [(f"random bytes {i}", bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400))) + b")(")
            for i in range(20)]
    return out


@pytest.mark.parametrize("name, source", _malformed_sources(), ids=[n for n, _ in _malformed_sources()])
def test_no_malformed_source_raises_out_of_grade_source(name, source):
    """Whatever bytes arrive, the answer is a report whose load.source says why, never an exception."""
    d = grade_source(source, "sdpa", seed=1).to_dict()
    json.dumps(d)
    assert d["score"] == 0 and d["checks"][0]["id"] == "load.source" and not d["checks"][0]["passed"], d["error"]
    assert d["error"] and len(d["error"]) > 20 and "Traceback" not in d["error"]


def test_load_failures_in_the_child():
    missing = grade_source("def attention(q, k, v):\n    return q\n", "sdpa", seed=1).to_dict()
    assert missing["score"] == 0 and "does not define scaled_dot_product_attention" in missing["error"]
    assert "attention" in missing["error"]
    crash = grade_source("import torch\nraise ValueError('boom at import')\n", "sdpa", seed=1).to_dict()
    assert crash["score"] == 0 and "boom at import" in crash["error"]
    assert "Traceback (most recent call last)" not in crash["error"]


def test_unknown_task_is_an_error():
    with pytest.raises(ValueError, match="unknown task"):
        grade_source(CORRECT, "nope")


def test_slow_check_fails_alone_and_student_frames_are_shown():
    source = CORRECT.replace("    return torch.softmax(s, -1) @ value", '''    if is_causal:
        while True:
            pass
    if scale is not None:
        helper(scale)
    return torch.softmax(s, -1) @ value


def helper(x):
    raise RuntimeError("student bug in helper")''')
    report = grade_source(source, "sdpa", seed=3, limits=Limits(call_seconds=1.0)).to_dict()
    checks = {c["id"]: c for c in report["checks"]}
    assert not checks["causal.square"]["passed"] and "did not finish in time" in checks["causal.square"]["message"]
    assert checks["mask.bool_broadcast"]["passed"] and checks["grad.reference"]["passed"] is False
    arg = checks["scale.argument"]
    assert not arg["passed"] and "student bug in helper" in arg["message"] and "submission.py line" in arg["message"]
    assert "harness" not in arg["details"]["traceback"] and 'File "submission.py"' in arg["details"]["traceback"]
    assert checks["output.shapes"]["passed"] and checks["stability.float32"]["passed"]


def test_report_shape_and_public_seed():
    report = grade_source(CORRECT, "sdpa", seed=99).to_dict()
    assert set(report) >= {"task", "score", "max_score", "passed", "checks", "error", "grader_version",
                           "sandbox", "warnings", "seed_public", "timings"}
    assert report["seed_public"] == 99 and report["passed"] and report["score"] == 100
    scale = next(c for c in report["checks"] if c["id"] == "scale.default")
    dks = [row["d_k"] for row in scale["details"]["variance_by_dk"]]
    assert dks[0] == 8 and dks[-1] == 512
    assert all(abs(row["variance"] - 1) < 0.5 and row["expected"] == 1.0 for row in scale["details"]["variance_by_dk"])
    secret = grade_source(CORRECT, "sdpa").to_dict()
    assert secret["seed_public"] is None and secret["passed"]


def test_weight_heatmaps_for_mask_failures():
    source = CORRECT.replace("s.masked_fill(~attn_mask", "s.masked_fill(attn_mask")
    report = grade_source(source, "sdpa", seed=5).to_dict()
    check = next(c for c in report["checks"] if c["id"] == "mask.bool_broadcast")
    assert not check["passed"] and "polarity" in check["message"]
    sub, ref = check["details"]["weights_submission"], check["details"]["weights_reference"]
    assert 1 < len(sub) <= 16 and len(sub) == len(ref) and len(sub[0]) == len(ref[0]) <= 16


@pytest.mark.gpu
def test_grading_on_cuda():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    report = grade_source(CORRECT, "sdpa", seed=11, device="cuda").to_dict()
    assert report["passed"], [c["message"] for c in report["checks"] if not c["passed"] and c["max_points"]]
    wrong_device = CORRECT.replace("return torch.softmax(s, -1) @ value", "return (torch.softmax(s, -1) @ value).cpu()")
    report = grade_source(wrong_device, "sdpa", seed=11, device="cuda").to_dict()
    assert any(c["id"].startswith("dtype.") and not c["passed"] for c in report["checks"])


def test_a_crashing_function_costs_a_bounded_number_of_children():
    source = "import os\ndef scaled_dot_product_attention(q, k, v, attn_mask=None, is_causal=False, scale=None):\n" \
             "    os._exit(3)\n"
    report = grade_source(source, "sdpa", seed=4).to_dict()
    crashed = [c for c in report["checks"] if "process ended unexpectedly" in c["message"]]
    skipped = [c for c in report["checks"] if c["message"].startswith("skipped: your function crashed")]
    assert len(crashed) == 6 and skipped and not report["passed"]
    assert "exit status 3" in crashed[0]["message"]


def _check(check_id, passed, diagnosis=None, **details):
    from grader.grading import CheckResult
    return CheckResult(check_id, passed, 4 if passed else 0, 4, "message", dict(details, **(
        {"diagnosis": diagnosis} if diagnosis else {})))


FAMILIES = {"output": 20, "scale": 15, "mask": 15, "grad": 10, "inputs": 2}


def test_a_knock_on_cannot_be_bought():
    """What the charged-once rule forgives is only what the parent saw hold (grader/causes.py)."""
    from grader.causes import charge_once, summary
    # the home family failed: the other checks the bug explains keep their points
    honest = [_check("scale.default", False, "no_scale"), _check("output.shapes", False, "no_scale"),
              _check("mask.bool", False, "no_scale")]
    (cause,) = charge_once(honest, FAMILIES)
    assert cause["charged"] == ["scale.default"] and [c.points for c in honest] == [0, 4, 4]
    # its family passed (a file that answers the probes right): charged wherever it shows
    probed = [_check("scale.default", True), _check("output.shapes", False, "no_scale"),
              _check("mask.bool", False, "no_scale")]
    (cause,) = charge_once(probed, FAMILIES)
    assert [c.points for c in probed] == [4, 0, 0] and cause["families"] == ["output", "mask"]
    assert "charged in each family where it shows: output, mask" in str(summary(probed, [cause]))
    # randomness never explains a failure away, even in its own family's presence
    noisy = [_check("output.shapes", False, "nondeterministic"), _check("mask.bool", False, "nondeterministic")]
    charge_once(noisy, FAMILIES)
    assert [c.points for c in noisy] == [0, 0]
    # a call that raised (an in-place error on purpose) or gave no gradient is never a knock-on
    raised = [_check("inputs.unchanged", False, "inputs_modified"),
              _check("grad.reference", False, "inputs_modified", error_kind="exception"),
              _check("grad.gradcheck", False, "inputs_modified", no_gradient=True)]
    (cause,) = charge_once(raised, FAMILIES)
    assert [c.points for c in raised] == [0, 0, 0] and not cause["knock_on"]


def test_one_bug_across_a_concept_is_charged_in_each_of_its_families():
    """Issue 40: a bug charged to padding that also breaks the causal and length checks is wrong about
    masking in each of them; the output and cross checks it breaks keep the knock-on refund."""
    from grader.causes import charge_once
    from grader.tasks import TASKS
    task = TASKS["decoder_attention"]
    checks = [_check(check_id, False, "masked_scores_zero") for check_id in
              ("output.shapes", "padding.target", "causal.self", "lengths.edges", "cross.not_causal")]
    moved = []
    (cause,) = charge_once(checks, task.points, task.bugs, task.concepts,
                           moved=lambda rule, check, points, **why: moved.append((rule, check.id, points)))
    assert cause["family"] == "padding" and cause["families"] == ["padding", "causal", "lengths"]
    assert [c.points for c in checks] == [4, 0, 0, 0, 4] and cause["knock_on"] == ["output.shapes", "cross.not_causal"]
    # the report's "rules" says which rule moved which points
    assert moved == [("knock_on", "output.shapes", 4), ("concept", "causal.self", 0),
                     ("concept", "lengths.edges", 0), ("knock_on", "cross.not_causal", 4)]
    # without the concept, the same bug was charged once, to padding alone
    checks = [_check(c.id, False, "masked_scores_zero") for c in checks]
    (cause,) = charge_once(checks, task.points, task.bugs)
    assert cause["families"] == ["padding"] and [c.points for c in checks] == [4, 0, 4, 4, 4]


def test_a_forbidden_check_that_cannot_finish_is_a_detection():
    from grader.checks.base import Check
    from grader.grading import _run_one

    class Ctx:
        passed, mutated = set(), {}

        def start(self, check_id):
            pass

    def deep(ctx):
        raise RecursionError("maximum recursion depth exceeded")

    got = []
    for cid in ("forbidden.static", "output.shapes"):
        _run_one(Ctx(), Check(cid, deep), lambda *a: got.append(a), {})
    (_, scan_ok, _, scan), (_, out_ok, _, out) = got
    assert not scan_ok and scan["detected"] and "RecursionError" in scan["internal_error"]
    assert not out_ok and "detected" not in out  # elsewhere a grader error stays a grader error


def test_causal_future_is_not_passed_by_luck():
    """A function that answers one input two ways (dropout left on) fails the future-keys check on
    every draw, not only where its two random answers happen to differ."""
    from grader.checks import masks
    from grader.checks.inputs import InputFactory

    calls = [0]

    def dropout_attention(q, k, v, is_causal=False):  # the same random draws on calls 1 and 2
        calls[0] += 1
        w = torch.softmax((q @ k.transpose(-2, -1) / q.size(-1) ** 0.5).masked_fill(
            ~torch.ones(q.size(-2), k.size(-2), dtype=torch.bool).tril(), float("-inf")), -1)
        keep = torch.rand(w.shape, generator=torch.Generator().manual_seed(calls[0] // 3)) > 0.1
        return (w * keep / 0.9) @ v

    class Ctx:
        inputs, diagnoses, attention_seen = InputFactory(7), [], True

        def call(self, *args, during="", **kwargs):
            return type("R", (), {"output": dropout_attention(*args, **kwargs)})

        def tensor_out(self, result, shape, what=""):
            return result.output

    with pytest.raises(masks.Fail) as caught:
        masks.causal_future(Ctx())
    assert caught.value.details["diagnosis"] == "nondeterministic"
