"""GPU grading: the half-precision suite (on the CPU here, on CUDA where present) and the
routing of GPU jobs to GPU workers pinned with CUDA_VISIBLE_DEVICES."""
import pytest
import torch
from sqlalchemy import select

from grader.checks.gpu_suite import run_gpu_suite
from grader.sandbox import SandboxSession
from service_support import ROOT, fake_grade
from web.db import session_factory
from web.dispatch import claim as claims
from web.dispatch.supervisor import Supervisor, worker_specs
from web.dispatch.worker import GradingWorker
from web.models import User
from web.services.courses import find_assignment
from web.services.submissions import submit

CORRECT = (ROOT / "grader" / "tasks" / "sdpa" / "corpus" / "correct" / "einsum.py").read_text()
# Right formula, but exp() of unshifted scores: fine in float32, inf/NaN in float16.
UNSHIFTED = '''import torch

def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None):
    s = query @ key.transpose(-2, -1) / query.shape[-1] ** 0.5
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf"))
    e = torch.exp(s)
    return (e / e.sum(-1, keepdim=True)) @ value
'''
NO_SCALE = '''import torch

def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None):
    s = query @ key.transpose(-2, -1)
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ value
'''
UPCASTS = '''import torch

def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None):
    q, k, v = query.float(), key.float(), value.float()
    s = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ v
'''


def _suite(source, device="cpu", dtypes=(torch.float32,), timing=False):
    with SandboxSession(source, "scaled_dot_product_attention", level="auto", device=device) as session:
        assert session.load().ok
        return {c["id"]: c for c in run_gpu_suite(session, device, dtypes=dtypes,
                                                   timing=timing)}


def test_a_correct_submission_passes_every_dtype_check_and_timing_is_worth_nothing():
    checks = _suite(CORRECT, dtypes=(torch.float32, torch.float16), timing=True)
    assert set(checks) == {"gpu.float32", "gpu.float32_masked", "gpu.float32_large_logits",
                           "gpu.float16", "gpu.float16_masked", "gpu.float16_large_logits",
                           "gpu.timing"}
    graded = [c for c in checks.values() if c["id"] != "gpu.timing"]
    assert all(c["passed"] and c["points"] == c["max_points"] > 0 for c in graded), graded
    timing = checks["gpu.timing"]
    assert (timing["passed"], timing["points"], timing["max_points"]) == (True, 0.0, 0.0)
    for key in ("submission_s", "reference_s", "torch_fused_s", "vs_torch_fused"):
        assert timing["details"][key] > 0
    assert "reported only" in timing["message"]


def test_float16_catches_the_unshifted_exponential_with_a_hint():
    checks = _suite(UNSHIFTED, dtypes=(torch.float16,))
    assert checks["gpu.float16"]["passed"]  # small scores: no overflow
    big = checks["gpu.float16_large_logits"]
    assert not big["passed"] and big["points"] == 0
    assert "NaN or infinite" in big["message"] and "subtract each row's maximum" in big["message"]


def test_a_wrong_formula_fails_with_the_difference_and_an_upcast_is_named():
    wrong = _suite(NO_SCALE)["gpu.float32"]
    assert not wrong["passed"] and "largest difference from the reference" in wrong["message"]
    upcast = _suite(UPCASTS, dtypes=(torch.bfloat16,))["gpu.bfloat16"]
    assert not upcast["passed"] and "returns float32" in upcast["message"]


def test_grade_report_gains_the_suite_as_reported_only_checks():
    from grader.grading import GradeReport, add_gpu_suite

    report = GradeReport(task="sdpa", checks=[])
    with SandboxSession(UNSHIFTED, "scaled_dot_product_attention", level="auto") as session:
        assert session.load().ok
        add_gpu_suite(report, session, "cpu", seed=3, dtypes=(torch.float16,))
    ids = [c.id for c in report.checks]
    assert ids == ["gpu.float16", "gpu.float16_masked", "gpu.float16_large_logits", "gpu.timing"]
    assert all(c.points == 0 and c.max_points == 0 for c in report.checks)  # never in the score
    assert not next(c for c in report.checks if c.id == "gpu.float16_large_logits").passed
    assert report.timings["gpu_suite_s"] > 0


@pytest.mark.gpu
def test_grading_on_cuda_adds_the_suite_and_keeps_the_score_out_of_it():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from grader.grading import grade_source

    report = grade_source(CORRECT, "sdpa", seed=1, device="cuda").to_dict()
    assert report["score"] == report["max_score"] == 100
    assert {"gpu.float16", "gpu.bfloat16", "gpu.timing"} <= {c["id"] for c in report["checks"]}


@pytest.mark.gpu
def test_half_precision_on_cuda():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    good = _suite(CORRECT, "cuda", (torch.float16, torch.bfloat16), timing=True)
    assert all(c["passed"] for c in good.values()), [c["message"] for c in good.values()]
    assert good["gpu.timing"]["details"]["device"].startswith("cuda")
    bad = _suite(UNSHIFTED, "cuda", (torch.float16,))
    assert not bad["gpu.float16_large_logits"]["passed"]


# ---- routing ---------------------------------------------------------------------------------

@pytest.mark.parametrize("device, queue", [("cpu", "cpu"), ("cuda", "gpu"), ("cuda:1", "gpu"),
                                           ("gpu", "gpu")])
def test_gpu_assignments_queue_on_gpu_and_gpu_workers_grade_on_cuda(service, device, queue):
    with session_factory(service.engine)() as session:
        assignment = find_assignment(session, "sdpa")
        assignment.device = device
        user = session.scalar(select(User).where(User.email == "ada@example.org"))
        job = submit(session, user, assignment, "# SCORE=10\n").job
        assert job.queue == queue
    other = "cpu" if queue == "gpu" else "gpu"
    assert claims.claim_next(service.engine, "wrong-kind", queues=(other,)) is None
    seen = []

    def grade(code, task, **kw):
        seen.append(kw["device"])
        return fake_grade(code, task, **kw)

    worker = GradingWorker(service.engine, service.config, grade_fn=grade, name=f"{queue}-w")
    assert worker.run_once([queue]) == "done"
    assert seen == ["cuda" if queue == "gpu" else "cpu"]


def test_each_gpu_worker_process_sees_only_its_gpu(monkeypatch):
    specs = worker_specs(2, gpus=["0", "3"], prefix="host")
    pinned = {s.name: (s.queues, s.env["CUDA_VISIBLE_DEVICES"]) for s in specs}
    assert pinned == {"host:cpu0": ("cpu", ""), "host:cpu1": ("cpu", ""),
                      "host:gpu0": ("gpu", "0"), "host:gpu3": ("gpu", "3")}
    launched = []

    class FakePopen:
        def __init__(self, argv, env):
            launched.append((argv, env))

    monkeypatch.setattr("web.dispatch.supervisor.subprocess.Popen", FakePopen)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")  # the host's, not the worker's
    supervisor = Supervisor({"DATABASE_URL": "sqlite://"}, specs[2:])
    for spec in supervisor.specs:
        supervisor._spawn(spec)
    assert [(a[a.index("--queues") + 1], e["CUDA_VISIBLE_DEVICES"]) for a, e in launched] == \
        [("gpu", "0"), ("gpu", "3")]


def test_a_task_that_prefers_a_gpu_falls_back_to_the_cpu_queue(service):
    from datetime import timedelta

    from web.services.grading import reconcile_jobs as reconcile
    from web.models import GradingJob, utcnow

    with session_factory(service.engine)() as session:
        assignment = find_assignment(session, "sdpa")
        assignment.device = "prefer-gpu"
        user = session.scalar(select(User).where(User.email == "ada@example.org"))
        early, late = (submit(session, user, assignment, f"# SCORE={n}\n").job.id for n in (9, 8))

    gpu = GradingWorker(service.engine, service.config, grade_fn=fake_grade, name="gpu-w")
    assert claims.claim_next(service.engine, "cpu-w", queues=("cpu",)) is None
    assert gpu.run_once(["gpu"]) == "done"  # a free GPU takes the first one

    sent = []

    class Recording:
        def notify(self, jobs):
            sent.extend(jobs)

    soon = reconcile(service.engine, Recording(), queued_stale_seconds=600,
                     gpu_fallback_seconds=60, now=utcnow() + timedelta(seconds=30))
    assert soon.to_cpu == [] and sent == []
    later = reconcile(service.engine, Recording(), queued_stale_seconds=600,
                      gpu_fallback_seconds=60, now=utcnow() + timedelta(seconds=61))
    assert later.to_cpu == [late] and sent == [(late, "cpu")]
    devices = []

    def grade(code, task, **kw):
        devices.append(kw["device"])
        return fake_grade(code, task, **kw)

    cpu = GradingWorker(service.engine, service.config, grade_fn=grade, name="cpu-w")
    assert cpu.run_once(["cpu"]) == "done" and devices == ["cpu"]
    with session_factory(service.engine)() as session:
        assert [session.get(GradingJob, j).queue for j in (early, late)] == ["gpu", "cpu"]


def test_gpu_check_grading_step_runs_on_the_cpu(tmp_path):
    import importlib.util
    import json
    import sys

    spec = importlib.util.spec_from_file_location("gpu_check_grading",
                                                  ROOT / "benchmarks" / "gpu_check.py")
    gpu_check = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = gpu_check  # its dataclasses look their module up
    spec.loader.exec_module(gpu_check)
    assert gpu_check.main(["--quick", "--steps", "grading", "--device", "cpu",
                           "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    names = {c["name"]: c["status"] for c in report["checks"]}
    assert names["correct: grade_source on cpu"] == "pass"
    assert names["buggy: grade_source on cpu"] == "pass"  # lost points, as it should
    assert names["correct: speed (0 points)"] == "info"
