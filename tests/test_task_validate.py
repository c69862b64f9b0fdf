"""``attn-grader tasks validate``: a small task folder written as a course author would, proved good,
then with four planted defects (a catalogue bug no case shows, an edge no case draws, a shortcut that
keeps full marks, a buggy file among the correct ones), each reported with a message the author can act on.

The fixture is tiny on purpose (one check, one correct and one buggy file, one seed, the pre-check's
local sandbox, the task itself as the budget's baseline): the six real tasks are validated by hand
(`attn-grader tasks validate grader/tasks/<id>`, minutes each), not in `make test`.
"""
import json
import os
import subprocess
import sys

import pytest

from grader.validate import load_task, validate

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

TASK_MODULE = '''
"""A tiny task: 2-D attention softmax(q kᵀ / √E) v, one check."""
from grader.tasks import Edges, Grading, Task, with_common_checks

PLANTED = {planted!r}


def wrong_outputs(args, kwargs):
    import math

    import torch
    q, k, v = (t.double() for t in args)
    scores = q @ k.T
    right = torch.softmax(scores / math.sqrt(q.size(-1)), -1) @ v
    wrong = {{"no_scale": torch.softmax(scores, -1) @ v, "softmax_queries": torch.softmax(
        scores / math.sqrt(q.size(-1)), 0) @ v}}
    if "unreachable" in PLANTED:  # no case is causal, so this bug never changes an output
        wrong["causal_ignored"] = right
    return right, wrong


def values(ctx):
    import torch
    from grader.checks.base import Fail
    from grader.checks.tolerance import relative_error
    from grader.checks.variants import identify
    L, S, E = ctx.inputs.distinct(3, 2, 9)
    q, k, v = (ctx.inputs.randn(n, E, dtype=torch.float64) for n in (L, S, S))
    out = ctx.tensor_out(ctx.call(q, k, v, during="attention"), (L, E))
    right, wrong = wrong_outputs((q, k, v), {{}})
    err = relative_error(out, right)
    if err > 1e-9:
        cause = identify(out, wrong, err)
        if cause:
            ctx.attention_seen = True
        raise Fail("the output differs from softmax(q kᵀ/√E) v", {{"diagnosis": cause}})
    ctx.attention_seen = True
    return "attention matches"


def build():
    from grader.checks.base import Check
    from grader.checks.variants import ATTENTION
    return Grading(checks=with_common_checks([Check("output.values", values)]),
                   bugs=ATTENTION.extend({{}}, {{"no_scale": ("output",), "softmax_queries": ("output",)}}),
                   wrong_outputs=wrong_outputs, describe=EDGES)


SPACE = {{"lengths": {{"L != S": lambda a, kw: a[0].size(0) != a[1].size(0)}}}}
if "edge" in PLANTED:  # L is drawn from 2..9: never 1
    SPACE["lengths"]["L = 1"] = lambda a, kw: a[0].size(0) == 1
EDGES = Edges(SPACE)

TASK = Task(id="tiny_attention", title="Tiny attention", function="attend", home=__file__, positional=3,
            keywords=(), arg_names=("q", "k", "v"), points={{"load": 10, "forbidden": 10, "output": 70, "inputs": 10}},
            build=build, skill="the scores, their scale and the softmax, by hand", input_space=EDGES.names)
'''

CORRECT = '''import math

import torch


def attend(q, k, v):
    return torch.softmax(q @ k.T / math.sqrt(q.size(-1)), dim=-1) @ v
'''
NO_SCALE = "# expect: output\n# cause: no_scale\n" + CORRECT.replace(" / math.sqrt(q.size(-1))", "")
BUILTIN = '''import torch.nn.functional as F


def attend(q, k, v):
    return F.scaled_dot_product_attention(q[None], k[None], v[None])[0]
'''
SKILL_SKIPPED = '''def attend(q, k, v):
    return v.mean(0, keepdim=True).expand(q.size(0), -1).clone()
'''


def write_task(root, name, planted=()):
    """A task folder as `attn-grader tasks validate` expects it: __init__.py, corpus/, shortcuts/."""
    folder = root / name
    (folder / "corpus" / "correct").mkdir(parents=True)
    (folder / "corpus" / "buggy").mkdir()
    (folder / "shortcuts").mkdir()
    (folder / "__init__.py").write_text(TASK_MODULE.format(planted=tuple(planted)), encoding="utf-8")
    (folder / "spec.md").write_text("# Tiny attention\n", encoding="utf-8")
    (folder / "corpus" / "correct" / "textbook.py").write_text(CORRECT, encoding="utf-8")
    (folder / "corpus" / "buggy" / "no_scale.py").write_text(NO_SCALE, encoding="utf-8")
    (folder / "shortcuts" / "builtin.py").write_text(BUILTIN, encoding="utf-8")
    if "misfiled" in planted:  # a file with a bug (its header says so) among the correct ones
        (folder / "corpus" / "correct" / "misfiled.py").write_text(NO_SCALE, encoding="utf-8")
    skill = CORRECT if "shortcut" in planted else SKILL_SKIPPED  # planted: "skipping" the skill keeps 100
    (folder / "shortcuts" / "skill.py").write_text(skill, encoding="utf-8")
    return folder


@pytest.fixture
def course_dir(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("course_task_")]:
        sys.modules.pop(name)


def test_a_good_task_passes_every_proof(course_dir):
    task = load_task(str(write_task(course_dir, "course_task_good")))
    result = validate(task, seeds=1, sandbox="local", baseline=task)
    failed = [f.message for f in result.findings if not f.ok]
    assert result.ok, failed
    proofs = {f.proof for f in result.findings}
    assert proofs == {"corpus", "bugs", "space", "shortcuts", "budget"}
    messages = " | ".join(f.message for f in result.findings)
    assert "buggy/no_scale.py: loses output only, named no_scale" in messages
    assert "shortcuts/builtin.py" in messages and "shortcuts/skill.py" in messages
    assert "edge lengths = L != S: drawn under every seed" in messages


def test_planted_defects_fail_with_messages_an_author_can_act_on(course_dir):
    folder = write_task(course_dir, "course_task_planted", planted=("unreachable", "edge", "shortcut", "misfiled"))
    out = subprocess.run([sys.executable, "-m", "grader.cli", "tasks", "validate", str(folder), "--seeds", "1",
                          "--sandbox", "local", "--json"], capture_output=True, text=True, cwd=ROOT, timeout=600,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, str(course_dir)])})
    assert out.returncode == 1, out.stderr[-2000:]
    report = json.loads(out.stdout)
    failed = [f["message"] for f in report["findings"] if not f["ok"]]
    assert not report["ok"] and len(failed) == 4, failed
    assert any("correct/misfiled.py says '# expect: output'" in m and "belongs in buggy/" in m for m in failed), failed
    assert any("bug 'causal_ignored': no scored case shows it" in m for m in failed), failed
    assert any("edge lengths = L = 1: no scored case draws it" in m for m in failed), failed
    assert any("shortcuts/skill.py" in m and "keeps 100 of 100" in m and "at least half" in m for m in failed), failed


def test_a_path_that_is_no_task_is_refused_clearly(tmp_path):
    out = subprocess.run([sys.executable, "-m", "grader.cli", "tasks", "validate", str(tmp_path / "nowhere")],
                         capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert out.returncode == 2 and "no such task folder" in out.stderr
