"""The hostile corpus (tests/hostile/) through the real strict sandbox.

Each file says what it attacks and which outcomes are acceptable (``# expect:``).
For every one we check that it gets a clear result within its time limit, that it
leaks no secret, earns nothing it did not compute honestly, and that afterwards
nothing of it is still running and the host is exactly as before.
"""
import glob
import hashlib
import os
import re
import socket
import time

import pytest
import torch

from grader.grading import grade_source
from grader.sandbox import Limits, SandboxSession, cgroups, forkserver, policy
from grader.sandbox.wall import strict_problems
from reference_impl import sdpa_float64

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOSTILE = os.path.join(ROOT, "tests", "hostile")
SECRET = "s3cr3t-" + hashlib.sha256(os.urandom(16)).hexdigest()[:24]
LIMITS = Limits(memory_bytes=1 << 30, cpu_seconds=3, wall_seconds=12, call_seconds=4, load_seconds=4,
                processes=32, file_size=8 << 20, tmp_size=16 << 20, output_bytes=256 << 10)
# Full gradings run dozens of calls: a tighter total keeps the slow attacks (loops, bombs) short.
GRADE_LIMITS = Limits(memory_bytes=1 << 30, cpu_seconds=2, wall_seconds=6, call_seconds=2, load_seconds=4,
                      processes=32, file_size=8 << 20, tmp_size=16 << 20, output_bytes=256 << 10)
GRADE_SEED = 20260
SLACK = 4.0  # start-up and teardown on a busy 2-core CI machine
FUNCTION = "scaled_dot_product_attention"  # the sdpa task's function

PROBLEMS = strict_problems()
pytestmark = pytest.mark.skipif(bool(PROBLEMS), reason="strict sandbox unavailable: " + "; ".join(PROBLEMS))


def expectations(path: str) -> set[str]:
    with open(path, "rb") as f:
        head = f.read(400).decode("utf-8", "replace")
    m = re.search(r"^# expect: (.+)$", head, re.M)
    return set(m.group(1).split()) if m else {"import", "missing"}  # binary or empty files


CASES = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(HOSTILE, "*.py")))


def _files_digest(paths):
    out = {}
    for p in paths:
        st = os.stat(p)
        with open(p, "rb") as f:
            out[p] = (hashlib.sha256(f.read()).hexdigest(), st.st_mode, st.st_mtime_ns)
    return out


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    """Secrets and a listener on the grader's side of the wall, and a snapshot of what must not change."""
    os.environ["ATTN_GRADER_TEST_SECRET"] = SECRET
    forkserver.shutdown()  # the zygote is started below with the secret present in our environment
    secret_dir = tmp_path_factory.mktemp("secret")
    secret_file = secret_dir / "api-token.txt"
    secret_file.write_text(SECRET)
    outside = tmp_path_factory.mktemp("outside")
    os.chmod(outside, 0o777)  # writable by anyone who could see it
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.setblocking(False)
    import torch.functional
    # Files of ours nobody edits while the suite runs (the tree is shared), plus torch's own.
    watched = sorted(glob.glob(os.path.join(ROOT, "grader", "sandbox", "*.py"))
                     + glob.glob(os.path.join(HOSTILE, "*.py"))
                     + [torch.__file__, torch.functional.__file__, str(secret_file)])
    info = {"secret_file": str(secret_file), "outside": str(outside), "listener": listener,
            "port": listener.getsockname()[1], "watched": watched, "digest": _files_digest(watched),
            "mounts": open("/proc/self/mountinfo").read()}
    yield info
    listener.close()
    os.environ.pop("ATTN_GRADER_TEST_SECRET", None)


@pytest.fixture(autouse=True)
def runs_before(host):
    """Run cgroups that were already there: each test answers for the runs it started itself."""
    host["runs_before"] = set(cgroups.leftover_runs())


def _source(name: str, host: dict) -> bytes:
    with open(os.path.join(HOSTILE, name + ".py"), "rb") as f:
        src = f.read()
    for key, value in (("SECRET_FILE", host["secret_file"]), ("OUTSIDE_DIR", host["outside"]),
                       ("PORT", str(host["port"])), ("REPO", ROOT), ("TORCH_FILE", torch.__file__)):
        src = src.replace(b"{{" + key.encode() + b"}}", value.encode())
    return src


def _inputs():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=g) for _ in range(3))  # (B, H, L, E)
    return q, k, v


def _slot_processes() -> list[str]:
    """Processes of a slot uid started by this test process (other sandboxes may share the machine)."""
    found = []
    lo, hi = forkserver.UID_BASE, forkserver.UID_BASE + forkserver.UID_SLOTS
    mine = f"/run-{os.getpid()}-"
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/status") as f:
                uid = next(int(line.split()[1]) for line in f if line.startswith("Uid:"))
            with open(f"/proc/{pid}/cgroup") as f:
                ours = mine in f.read()
        except (OSError, StopIteration, ValueError):
            continue
        if lo <= uid < hi and ours:
            found.append(pid)
    return found


def run_case(name: str, host: dict) -> dict:
    q, k, v = _inputs()
    start = time.monotonic()
    with SandboxSession(_source(name, host), FUNCTION, level="strict", limits=LIMITS) as s:
        assert s.level == "strict"
        loaded = s.load()
        result = s.call(q, k, v) if loaded.ok else None
        stdout, stderr, charged = s.stdout, s.stderr, s.charged
    elapsed = time.monotonic() - start
    error = loaded.error if not loaded.ok else result.error
    if error is not None:
        outcome = error.kind
    else:
        out = result.output
        good = (isinstance(out, torch.Tensor) and out.shape == (2, 3, 5, 8)
                and torch.allclose(out.double(), sdpa_float64(q, k, v), atol=1e-5))
        outcome = "correct" if good else "wrong"
    return {"outcome": outcome, "error": error, "result": result, "stdout": stdout, "stderr": stderr,
            "elapsed": elapsed, "charged": charged}


BLANK = """
def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    return q.new_zeros(q.shape[:-1] + v.shape[-1:])
"""


@pytest.fixture(scope="module")
def blank_score():
    """What an honest blank answer (zeros of the right shape) earns: hostile tricks must earn no more."""
    return grade_source(BLANK, "sdpa", sandbox="strict", seed=GRADE_SEED, limits=GRADE_LIMITS).score


def assert_in_time(elapsed: float, charged: float, limits: Limits) -> None:
    """Within the run's own time (the waits for a core that other tests keep busy are not charged,
    see grader/sandbox/waiting.py), and within its wall-clock backstop whatever the load."""
    assert charged < limits.wall_seconds + SLACK, charged
    assert elapsed < limits.wall_seconds * policy.LOAD_STRETCH + SLACK, elapsed


def assert_contained(host: dict, texts: list[str]) -> None:
    """Nothing leaked, nothing escaped, nothing survives, and the host is exactly as before."""
    seen = " ".join(str(t) for t in texts)
    assert SECRET not in seen
    for marker in ("CONNECTED", "SUCCEEDED", "TAMPERED", "NETLINK OPEN"):
        assert marker not in seen, seen[:2000]
    deadline = time.monotonic() + 3
    while _slot_processes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _slot_processes() == []
    assert forkserver.drain(), forkserver.janitor.lingering and forkserver.janitor.lingering[0][0].describe()
    assert set(cgroups.leftover_runs()) - host["runs_before"] == set()
    with pytest.raises(BlockingIOError):
        host["listener"].accept()
    assert _files_digest(host["watched"]) == host["digest"]
    assert os.listdir(host["outside"]) == []
    assert open("/proc/self/mountinfo").read() == host["mounts"]


@pytest.mark.parametrize("name", CASES)
def test_hostile_submission_is_graded_and_contained(name, host, blank_score):
    """The full grader, through the strict sandbox: a clear report, in time, no unearned points."""
    expected = expectations(os.path.join(HOSTILE, name + ".py"))
    start = time.monotonic()
    report = grade_source(_source(name, host), "sdpa", sandbox="strict", seed=GRADE_SEED, limits=GRADE_LIMITS)
    elapsed = time.monotonic() - start
    assert report.sandbox == "strict" or (report.sandbox == "" and report.checks[0].id == "load.source"
                                          and not report.checks[0].passed)  # refused before any run
    assert_in_time(elapsed, report.timings["student_s"], GRADE_LIMITS)
    if "correct" in expected:
        assert report.score == report.max_score, [c.message for c in report.checks if not c.passed]
    else:
        assert not report.passed and report.score <= blank_score, (report.score, blank_score)
    failed = [c for c in report.checks if not c.passed]
    assert all(len(c.message) > 10 for c in failed), [c.message for c in failed]
    d = report.to_dict()
    assert_contained(host, [d, report.student_stdout, report.student_stderr])


@pytest.mark.parametrize("name", CASES)
def test_hostile_call_outcome(name, host):
    """One call at the SandboxSession level: the failure is named for what it is (timeout, memory, crash...)."""
    expected = expectations(os.path.join(HOSTILE, name + ".py"))
    r = run_case(name, host)
    outcome, error = r["outcome"], r["error"]
    if "correct" in expected:
        assert outcome == "correct", (outcome, error)
    else:
        assert outcome != "correct", f"{name} earned points it did not compute honestly"
        assert "any" in expected or outcome in expected, (outcome, error)
    if error is not None:
        assert error.message and len(error.message) > 10, error
    assert_in_time(r["elapsed"], r["charged"], LIMITS)
    assert len(r["stdout"]) <= LIMITS.output_bytes + 100 and len(r["stderr"]) <= LIMITS.output_bytes + 100
    assert_contained(host, [error, r["stdout"], r["stderr"], r["result"].output_type if r["result"] else ""])


def test_tmp_does_not_persist_between_runs(host):
    first, second = run_case("tmp_persistence", host), run_case("tmp_persistence", host)
    for r in (first, second):
        assert r["outcome"] == "wrong"
        assert float(r["result"].output.flatten()[0]) == 0.0  # 1000 would mean it saw the first run's file


def test_flood_is_capped_and_the_zygote_survives_the_corpus(host):
    r = run_case("output_flood", host)
    assert 0 < len(r["stdout"]) <= LIMITS.output_bytes + 100
    assert run_case("correct", host)["outcome"] == "correct"


def test_messages_say_what_happened(host):
    assert "memory limit" in run_case("shm_bomb", host)["error"].message
    loop = run_case("infinite_loop", host)["error"].message
    assert "CPU time limit" in loop or "time limit" in loop
    assert "segmentation fault" in run_case("segfault", host)["error"].message
    assert "no function named 'scaled_dot_product_attention'" in run_case("missing_function", host)["error"].message


def test_a_child_that_stops_reading_cannot_hang_the_grader(host):
    q, k, v = _inputs()
    big = torch.randn(4, 8, 256, 256)  # 8 MiB: far more than a pipe holds
    start = time.monotonic()
    with SandboxSession(_source("stall_reader", host), FUNCTION, level="strict", limits=LIMITS) as s:
        assert s.call(q, k, v).ok
        time.sleep(0.1)  # the itimer fires: the harness is parked before reading again
        r = s.call(big, big, big)
    assert not r.ok and r.error.kind == "timeout", r.error
    assert time.monotonic() - start < LIMITS.call_seconds + SLACK
