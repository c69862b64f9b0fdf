"""A course's own task, shipped as a separate package, is found through the ``attn_grader.tasks``
entry-point group and graded end to end by the CLI and by the service, without touching the grader.

The package is written to a temporary folder with a ``.dist-info`` holding its entry point, and
that folder is put on ``sys.path`` (for subprocesses: ``PYTHONPATH``), which is all that
``importlib.metadata`` needs to see it as installed. Its function returns a tuple of two tensors,
so the sandbox's tuple outputs are exercised too.
"""
import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from grader import tasks

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

TASK_MODULE = '''
"""A tiny task: a numerically stable softmax over the last dimension and its log-sum-exp."""
from grader.tasks import Grading, Task


def values(ctx):
    import torch
    from grader.checks.base import Fail
    rows, cols = ctx.inputs.distinct(2, 3, 9)
    x = ctx.inputs.randn(rows, cols, dtype=torch.float64) * 400  # exp overflows float64
    result = ctx.call(x, during="softmax rows")
    p, lse = ctx.tuple_out(result, [(rows, cols), (rows,)], ("probabilities", "lse"), "softmax rows")
    if not torch.allclose(p, torch.softmax(x, -1), atol=1e-9):
        raise Fail("the probabilities differ from softmax(x, dim=-1)")
    if not torch.allclose(lse, torch.logsumexp(x, -1), atol=1e-9):
        raise Fail("the log-sum-exp differs from torch.logsumexp(x, dim=-1)")
    ctx.attention_seen = True
    return "softmax and log-sum-exp match"


def build():
    from grader.checks import forbidden
    from grader.checks.base import Check
    return Grading(checks=[Check("output.values", values),
                           Check("forbidden.runtime", forbidden.runtime_check, post=True)])


TASK = Task(id="softmax_lse", title="Softmax with log-sum-exp", function="softmax_lse", home=__file__,
            positional=1, keywords=(), arg_names=("x",), points={"load": 10, "output": 80, "forbidden": 10},
            build=build, outputs=2)
'''

CORRECT = '''
import torch


def softmax_lse(x):
    m = x.max(dim=-1, keepdim=True).values
    lse = m.squeeze(-1) + torch.log(torch.exp(x - m).sum(-1))
    return torch.exp(x - lse.unsqueeze(-1)), lse
'''

OVERFLOWS = '''
import torch


def softmax_lse(x):
    e = torch.exp(x)
    return e / e.sum(-1, keepdim=True), torch.log(e.sum(-1))
'''


def write_course_package(root):
    """my_course/softmax_lse/: the task's folder, laid out as the grader's own (``__init__.py`` with the
    Task, ``spec.md``, ``template.py.tmpl``), and an installed-looking dist-info."""
    pkg = root / "my_course"
    folder = pkg / "softmax_lse"
    folder.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (folder / "__init__.py").write_text(TASK_MODULE)
    (folder / "spec.md").write_text("# Softmax with log-sum-exp\n\nReturn `(softmax(x), logsumexp(x))`.\n")
    (folder / "template.py.tmpl").write_text("import torch\n\n\ndef softmax_lse(x):\n    ...\n")
    info = root / "my_course-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-course\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[attn_grader.tasks]\nsoftmax_lse = my_course.softmax_lse:TASK\n")
    return root


@pytest.fixture
def course_package(tmp_path, monkeypatch):
    (tmp_path / "site").mkdir()
    root = write_course_package(tmp_path / "site")
    monkeypatch.syspath_prepend(str(root))
    tasks.registry(refresh=True)
    yield root
    monkeypatch.undo()
    sys.modules.pop("my_course.softmax_lse", None)
    sys.modules.pop("my_course", None)
    tasks.registry(refresh=True)


def cli(*args, package):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(package), ROOT])}
    return subprocess.run([sys.executable, "-m", "grader.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=240)


def test_the_entry_point_task_is_registered_after_the_package_tasks(course_package):
    registered = tasks.registry()
    assert list(registered)[:2] == ["sdpa", "mha"] and list(registered)[-1] == "softmax_lse"
    assert registered["softmax_lse"].outputs == 2
    assert "Return `(softmax(x), logsumexp(x))`" in tasks.spec_markdown("softmax_lse")


def test_cli_lists_prints_and_grades_the_course_task(course_package, tmp_path):
    listing = cli("tasks", package=course_package)
    assert listing.returncode == 0 and "softmax_lse" in listing.stdout and "sdpa" in listing.stdout
    assert "def softmax_lse(x):" in cli("template", "softmax_lse", package=course_package).stdout
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_text(CORRECT)
    bad.write_text(OVERFLOWS)
    passed = cli("check", str(good), "--task", "softmax_lse", "--json", package=course_package)
    report = json.loads(passed.stdout)
    assert passed.returncode == 0, report
    assert (report["task"], report["score"], report["max_score"]) == ("softmax_lse", 100, 100)
    failed = cli("check", str(bad), "--task", "softmax_lse", "--json", package=course_package)
    report = json.loads(failed.stdout)
    # load only: no output matched, so forbidden.runtime could not verify the run and nothing else scores
    assert failed.returncode == 1 and report["score"] == 10
    values = next(c for c in report["checks"] if c["id"] == "output.values")
    assert not values["passed"] and "probabilities" in values["message"]


def test_cli_names_a_task_that_is_not_registered(course_package):
    unknown = cli("check", "x.py", "--task", "nope", package=course_package)
    assert unknown.returncode == 2 and "softmax_lse" in unknown.stderr


def test_a_one_tensor_answer_to_a_tuple_task_is_a_clear_failure(course_package):
    from grader.grading import grade_source
    report = grade_source("import torch\n\ndef softmax_lse(x):\n    return torch.softmax(x, -1)\n",
                          "softmax_lse", seed=3, sandbox="auto")
    values = next(c for c in report.checks if c.id == "output.values")
    assert not values.passed and "returned one tensor" in values.message


@pytest.mark.parametrize("service", ["sqlite"], indirect=True)
def test_the_service_offers_and_grades_the_course_task(course_package, service):
    from sqlalchemy import select

    from web import create_app
    from web.db import session_factory
    from web.dispatch.worker import GradingWorker
    from web.models import Assignment
    from web.services.courses import ensure_default_course
    from web.services.grading import load_grade_function

    with session_factory(service.engine)() as session:  # the seeded course predates the package
        ensure_default_course(session)
        session.commit()
        assignment = session.scalar(select(Assignment).where(Assignment.slug == "softmax_lse"))
        assert assignment is not None and assignment.kind == "task"
    config = {**service.config, "GRADE_FUNCTION": "grader.grading:grade_source", "SANDBOX": "auto"}
    client = create_app(config).test_client()
    headers = {"Authorization": f"Bearer {service.people['ada']['token']}"}
    listed = client.get("/api/v1/tasks", headers=headers).get_json()
    assert "softmax_lse" in json.dumps(listed)
    sub = client.post("/api/v1/submissions", headers=headers,
                      json={"task": "softmax_lse", "code": CORRECT}).get_json()
    worker = GradingWorker(service.engine, config, grade_fn=load_grade_function(config["GRADE_FUNCTION"]))
    assert worker.run_once() == "done"
    view = client.get(sub["url"], headers=headers).get_json()
    assert (view["status"], view["passed"], view["score"], view["max_score"]) == ("done", True, 100, 100)
    assert {c["id"] for c in view["checks"]} >= {"output.values", "forbidden.runtime"}


def test_a_tuple_answer_is_accepted_only_where_the_task_returns_a_tuple():
    import torch

    from grader.sandbox import answers
    x = torch.zeros(2, 3)
    pair = {"ok": True, "output": [torch.zeros(2, 3), torch.zeros(2)]}
    checked = answers.check_call(pair, [x], {}, [], False, outputs=2)
    assert isinstance(checked["output"], tuple) and [t.shape for t in checked["output"]] == [(2, 3), (2,)]
    for forged, outputs in ((pair, 1), ({"ok": True, "output": [x] * 9}, 2), ({"ok": True, "output": [x, "x"]}, 2),
                            ({"ok": True, "output": []}, 2)):
        with pytest.raises(answers.ProtocolViolation):
            answers.check_call(forged, [x], {}, [], False, outputs=outputs)


def test_a_check_runs_after_the_checks_it_needs_and_must_declare_them():
    from grader.checks.base import Check, Context
    from grader.tasks import Grading
    first, second = Check("b.second", len, needs=("a.first",)), Check("a.first", len)
    assert [c.id for c in Grading(checks=[first, second]).checks] == ["a.first", "b.second"]
    with pytest.raises(ValueError, match="does not have"):
        Grading(checks=[Check("x.y", len, needs=("nope.none",))])
    with pytest.raises(ValueError, match="circle"):
        Grading(checks=[Check("a.a", len, needs=("b.b",)), Check("b.b", len, needs=("a.a",))])
    with pytest.raises(ValueError, match="post-phase"):
        Grading(checks=[Check("a.a", len, needs=("p.p",)), Check("p.p", len, post=True)])
    ctx = Context(SimpleNamespace(charged=0.0), tasks.TASKS["mha"], 1, "cpu", 1.0)
    ctx.start("heads.split_merge")
    assert ctx.passed_check("heads.single_head") is False
    ctx.start("mask.bool")
    with pytest.raises(RuntimeError, match="without declaring"):
        ctx.passed_check("heads.single_head")


def test_the_shared_checks_and_the_scoring_import_no_task():
    """The fingerprint mechanism, the bans and the scoring sit below the tasks: importing them loads no
    task (each task's fingerprint part and bug catalogue lie in its own folder)."""
    code = ("import sys\nimport grader.checks.fingerprint, grader.checks.forbidden, grader.checks.autograd_ban, "
            "grader.checks.variants, grader.checks.bugs, grader.causes\n"
            "print([m for m in sys.modules if m.startswith('grader.tasks')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": ROOT}, check=True)
    assert out.stdout.strip() == "[]", out.stdout
