"""How the sandbox is built: levels, walls inside the child, reuse across sessions and threads,
recovery from dead children and a dead fork server. The hostile corpus is in test_sandbox_hostile.py."""
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import torch

from grader.sandbox import Limits, SandboxUnavailable, SandboxSession, cgroups, forkserver, wall
from grader.sandbox.backends import select_backend

STRICT_PROBLEMS = wall.strict_problems()
needs_strict = pytest.mark.skipif(bool(STRICT_PROBLEMS),
                                  reason="strict sandbox unavailable: " + "; ".join(STRICT_PROBLEMS))
LIMITS = Limits(cpu_seconds=5, wall_seconds=20, call_seconds=5, load_seconds=10, memory_bytes=1 << 30)

CORRECT = """
import torch
def sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    return torch.softmax(q @ k.transpose(-2, -1) / q.size(-1) ** 0.5, dim=-1) @ v
"""


@pytest.fixture(autouse=True)
def _runs_before():
    """Run cgroups already there: each test answers for the runs it started itself."""
    global RUNS_BEFORE
    RUNS_BEFORE = set(cgroups.leftover_runs())


def nothing_left() -> bool:
    """Every run of this test torn down: processes gone, cgroups removed."""
    return forkserver.drain() and set(cgroups.leftover_runs()) - RUNS_BEFORE == set()


def _qkv(seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(2, 4, 6, 8, generator=g) for _ in range(3)]  # (B, H, L, E)


def _expected(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) / q.size(-1) ** 0.5, dim=-1) @ v


# -- levels ------------------------------------------------------------------------------
def test_unknown_level_is_a_clear_error():
    with pytest.raises(ValueError, match="strict, auto, none or local"):
        select_backend("paranoid", Limits(), "cpu")


def test_strict_refuses_and_names_what_is_missing(monkeypatch):
    monkeypatch.setattr(wall, "strict_problems", lambda wall=True: ["bubblewrap for the outer wall"])
    with pytest.raises(SandboxUnavailable, match="missing: bubblewrap for the outer wall"):
        SandboxSession(CORRECT, "sdpa", level="strict")


def test_auto_falls_back_to_a_plain_subprocess_with_a_warning(monkeypatch):
    monkeypatch.setattr(wall, "strict_problems", lambda wall=True: ["Linux namespaces (this is darwin)"])
    q, k, v = _qkv()
    # -B as well as -I: the plain child imports the installed package and writes no bytecode
    # into it for later children to load
    code = CORRECT + "\nimport sys\nassert sys.flags.dont_write_bytecode\n"
    with SandboxSession(code, "sdpa", level="auto", limits=LIMITS) as s:
        assert s.level == "auto"
        assert any("plain subprocess" in w and "darwin" in w for w in s.warnings)
        r = s.call(q, k, v)
    assert r.ok and torch.allclose(r.output, _expected(q, k, v), atol=1e-6)


def test_none_runs_unconfined_and_says_so():
    with SandboxSession(CORRECT, "sdpa", level="none", limits=LIMITS) as s:
        assert s.level == "none" and "unconfined" in s.warnings[0]
        assert s.call(*_qkv()).ok


@needs_strict
def test_auto_uses_every_layer_when_the_host_has_them():
    with SandboxSession(CORRECT, "sdpa", level="auto", limits=LIMITS) as s:
        assert s.level == "strict" and s.warnings == []


# -- inside the walls ----------------------------------------------------------------------
PROBE = r'''
import os, socket
def sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    status = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
    info = {"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(), "pid": os.getpid(),
            "cap": status["CapEff"].strip(), "nnp": status["NoNewPrivs"].strip(),
            "seccomp": status["Seccomp"].strip(), "fds": sorted(os.listdir("/proc/self/fd")),
            "pids": sorted(p for p in os.listdir("/proc") if p.isdigit()), "root": sorted(os.listdir("/")),
            "env": sorted(os.environ), "host": socket.gethostname(), "cwd": os.getcwd(),
            "ro": os.statvfs("/").f_flag & 1, "tmp_ro": os.statvfs("/tmp").f_flag & 1}
    print(repr(info))
    return q
'''


@needs_strict
def test_auto_without_bubblewrap_keeps_the_inner_layers(monkeypatch):
    monkeypatch.setattr(wall, "bwrap_path", lambda: None)
    with SandboxSession(PROBE, "sdpa", level="auto", limits=LIMITS) as s:
        assert s.level == "auto" and "bubblewrap" in s.warnings[0]
        assert s.call(*_qkv()).ok
        info = eval(s.stdout.strip().splitlines()[-1])
    assert info["pid"] == 1 and info["seccomp"] == "2" and info["uid"] >= forkserver.UID_BASE
    with pytest.raises(SandboxUnavailable, match="bubblewrap"):
        SandboxSession(CORRECT, "sdpa", level="strict")
    forkserver._zygotes.pop((False, False)).close()  # the wall-less zygote is this test's only


@needs_strict
def test_the_child_is_walled_in():
    with SandboxSession(PROBE, "sdpa", level="strict", limits=LIMITS) as s:
        assert s.call(*_qkv()).ok
        out = s.stdout
    info = eval(out.strip().splitlines()[-1])  # our own probe's repr of plain literals
    assert forkserver.UID_BASE <= info["uid"] < forkserver.UID_BASE + forkserver.UID_SLOTS
    assert info["gid"] == info["uid"] and info["groups"] == []
    assert info["pid"] == 1 and info["pids"] == ["1"]          # its own pid namespace, nothing else visible
    assert info["cap"] == "0000000000000000" and info["nnp"] == "1" and info["seccomp"] == "2"
    assert len(info["fds"]) <= 6 and {"0", "1", "2", "3", "4"} <= set(info["fds"])  # (+ listdir's own)
    # Only the system's library folders and the top folders of the interpreter, venv and packages
    # (wherever this checkout lives: a CI clone may sit under any top folder).
    bound = {root.strip("/").split("/")[0] for root in wall.python_roots()}
    assert set(info["root"]) <= {"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "dev",
                                 "proc", "tmp", "sub"} | bound, bound
    assert not any(name.startswith("ATTN_GRADER") for name in info["env"])
    assert info["host"] == "sandbox" and info["cwd"] == "/tmp" and info["ro"] == 1 and info["tmp_ro"] == 0


@needs_strict
def test_session_survives_a_crash_and_replaces_the_child():
    src = CORRECT + "\nimport os\n_f = sdpa\ndef sdpa(q, k, v, **kw):\n    if q[0, 0, 0, 0] == 42:\n" \
                    "        os._exit(3)\n    return _f(q, k, v)\n"
    with SandboxSession(src, "sdpa", level="strict", limits=LIMITS) as s:
        for i in range(6):
            q, k, v = _qkv(i)
            if i == 2:
                q[0, 0, 0, 0] = 42
            r = s.call(q, k, v)
            if i == 2:
                assert not r.ok and r.error.kind == "crash" and "exit status 3" in r.error.message
            else:
                assert r.ok and torch.allclose(r.output, _expected(q, k, v), atol=1e-6)
        assert s.restarts == 1
    assert nothing_left()


@needs_strict
def test_prints_are_all_there_as_soon_as_the_call_returns():
    src = "import sys\ndef sdpa(q, k, v, **kw):\n    sys.stdout.write('x' * 9000 + '|')\n    return q\n"
    with SandboxSession(src, "sdpa", level="strict", limits=LIMITS) as s:
        for i in range(1, 41):
            assert s.call(*_qkv()).ok
            assert s.stdout.count("|") == i and len(s.stdout) == 9001 * i


@needs_strict
def test_total_wall_clock_limit_across_calls():
    src = "import time\ndef sdpa(q, k, v, **kw):\n    time.sleep(0.8)\n    return q\n"
    limits = Limits(wall_seconds=2.0, call_seconds=10, load_seconds=5, cpu_seconds=5)
    start = time.monotonic()
    with SandboxSession(src, "sdpa", level="strict", limits=limits) as s:
        results = [s.call(*_qkv()) for _ in range(4)]
    assert time.monotonic() - start < 5
    assert results[0].ok and any(r.error and r.error.kind == "timeout" for r in results)


BUSY = """
import time
def sdpa(q, k, v, **kw):
    began = time.process_time()
    while time.process_time() - began < 0.8:  # the same work on an idle or a busy host
        pass
    return q
"""
SLEEPS = "import time\ndef sdpa(q, k, v, **kw):\n    time.sleep(60)\n    return q\n"
LEVELS = ["local", "none"] + ([] if STRICT_PROBLEMS else ["strict"])


@pytest.mark.parametrize("level", LEVELS)
def test_waiting_for_a_busy_core_is_not_charged_to_the_call(level):
    """Two other programs share the child's one core, so 0.8 s of its work takes about 2.4 s of
    wall time, past its 1.5 s limit: the call still answers, as it does on an idle host (the same
    code, the same verdict). A call that sleeps waits for no core and still ends at its limit."""
    from grader.sandbox import waiting

    limits = Limits(wall_seconds=30, call_seconds=1.5, load_seconds=20, cpu_seconds=20)
    cpu = sorted(os.sched_getaffinity(0))[-1]
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        for hog in hogs:
            os.sched_setaffinity(hog.pid, {cpu})
        for src, answers in ((BUSY, True), (SLEEPS, False)):
            with SandboxSession(src, "sdpa", level=level, limits=limits) as s:
                assert s.load().ok
                for tid in waiting.child_threads(s.child):  # threads started later inherit it
                    os.sched_setaffinity(tid, {cpu})
                result = s.call(*_qkv())
            assert result.ok is answers, result.error
            if not answers:
                assert result.error.kind == "timeout"
            assert s.charged < limits.wall_seconds
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert nothing_left()


@needs_strict
def test_killing_the_waiter_kills_the_child():
    """PR_SET_PDEATHSIG is cleared by setuid; the child re-arms it (pitfall P6)."""
    src = "import time\ndef sdpa(q, k, v, **kw):\n    time.sleep(30)\n"
    with SandboxSession(src, "sdpa", level="strict", limits=LIMITS) as s:
        assert s.load().ok
        run = s.child.cgroup
        procs = {pid: os.stat(f"/proc/{pid}").st_uid for pid in run.pids()}
        waiter = [pid for pid, uid in procs.items() if uid == 0]
        student = [pid for pid, uid in procs.items() if uid != 0]
        assert len(waiter) == 1 and len(student) == 1
        os.kill(waiter[0], signal.SIGKILL)
        deadline = time.monotonic() + 3
        while run.pids() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert run.pids() == set()
        r = s.call(*_qkv(), timeout=10)
        assert not r.ok and r.error.kind == "crash", r.error  # reported, and the next call starts afresh


# -- sharing: threads, processes, restarts -----------------------------------------------------
@needs_strict
def test_one_zygote_serves_many_threads():
    failures = []

    def worker(seed):
        try:
            for i in range(3):
                q, k, v = _qkv(seed * 10 + i)
                with SandboxSession(CORRECT, "sdpa", level="strict", limits=LIMITS) as s:
                    r = s.call(q, k, v)
                if not (r.ok and torch.allclose(r.output, _expected(q, k, v), atol=1e-6)):
                    failures.append((seed, i, r.error))
        except Exception as exc:  # noqa: BLE001 - reported below
            failures.append((seed, repr(exc)))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert failures == []
    assert len({z.proc.pid for z in forkserver._zygotes.values()}) == len(forkserver._zygotes) == 1
    assert nothing_left()


@needs_strict
def test_a_dead_zygote_is_restarted_and_outlives_the_thread_that_started_it():
    with SandboxSession(CORRECT, "sdpa", level="strict", limits=LIMITS) as s:
        assert s.call(*_qkv()).ok
    (z,) = forkserver._zygotes.values()
    z.proc.kill()
    z.proc.wait()

    def in_a_short_lived_thread():  # like a web server's request thread
        with SandboxSession(CORRECT, "sdpa", level="strict", limits=LIMITS) as s:
            assert s.call(*_qkv()).ok

    t = threading.Thread(target=in_a_short_lived_thread)
    t.start()
    t.join(60)
    time.sleep(0.5)
    (z2,) = forkserver._zygotes.values()
    assert z2 is not z and z2.alive()  # it does not die with the thread that needed it
    with SandboxSession(CORRECT, "sdpa", level="strict", limits=LIMITS) as s:
        assert s.call(*_qkv()).ok
    assert forkserver._zygotes[(True, False)] is z2


@needs_strict
def test_a_forked_grader_process_gets_its_own_zygote():
    with SandboxSession(CORRECT, "sdpa", level="strict", limits=LIMITS) as s:
        assert s.call(*_qkv()).ok
    parent_zygote = next(iter(forkserver._zygotes.values()))
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            assert forkserver._zygotes == {}
            with SandboxSession(CORRECT, "sdpa", level="strict", limits=LIMITS) as s:
                code = 0 if s.call(*_qkv()).ok else 2
            forkserver.shutdown()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert parent_zygote.alive()  # the child did not take ours down
    with SandboxSession(CORRECT, "sdpa", level="strict", limits=LIMITS) as s:
        assert s.call(*_qkv()).ok


# -- pre-warmed single-use workers (the GPU path, exercised on CPU) ----------------------------
@pytest.fixture
def cpu_prewarm():
    """CPU runs take pre-warmed children, as in a grading worker (``SANDBOX_PREWARM``)."""
    from grader.sandbox import pool

    pool.prewarm_cpu(True)
    yield
    pool.prewarm_cpu(False)


@needs_strict
def test_prewarmed_workers_are_single_use(cpu_prewarm):
    src = CORRECT + ("\nimport os\n_f = sdpa\ndef sdpa(q, k, v, **kw):\n"
                     "    seen = os.path.exists('/tmp/mark')\n    open('/tmp/mark', 'w').close()\n"
                     "    if seen:\n        raise RuntimeError('worker reused')\n    return _f(q, k, v)\n")
    try:
        for _ in range(3):
            q, k, v = _qkv()
            with SandboxSession(src, "sdpa", level="strict", limits=LIMITS) as s:
                r = s.call(q, k, v)
                assert r.ok, r.error
                assert torch.allclose(r.output, _expected(q, k, v), atol=1e-6)
                bad = s.call(q, k, v)  # same worker within a session: the mark is there
                assert not bad.ok and "worker reused" in bad.error.message
                assert "line" in bad.error.traceback and "raise RuntimeError" in bad.error.traceback
    finally:
        forkserver.shutdown()
    assert nothing_left()


@needs_strict
def test_a_prewarmed_child_is_ready_before_the_next_submission_arrives(cpu_prewarm, monkeypatch):
    """The service's workers: the child a submission gets was walled in while nothing waited."""
    try:
        with SandboxSession(CORRECT, "sdpa", level="strict", limits=LIMITS) as s:
            assert s.call(*_qkv()).ok
        pool = s.backend.pool
        deadline = time.monotonic() + 30
        while not pool.ready and time.monotonic() < deadline:  # refilled in the background
            time.sleep(0.05)
        (waiting,) = pool.ready
        # It finishes walling itself in with no submission in sight (nothing here asks it to).
        assert waiting.wait_ready(30) is None and waiting.ready
        spawned = []
        monkeypatch.setattr(pool, "_spawn", lambda: spawned.append(1) or forkserver.StrictChild(
            forkserver.get_zygote(pool.wall, pool.gpu, pool.limits), pool.limits, pool.device, None,
            warm=True))
        q, k, v = _qkv(1)
        with SandboxSession(CORRECT, "sdpa", level="strict", limits=LIMITS) as s:
            r = s.call(q, k, v)
            assert s.child is waiting and r.ok
            assert torch.allclose(r.output, _expected(q, k, v), atol=1e-6)
        assert spawned in ([], [1])  # at most the refill for the submission after this one
    finally:
        forkserver.shutdown()
    assert nothing_left()


@pytest.mark.gpu
@needs_strict
def test_gpu_worker_runs_on_cuda():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    with SandboxSession(CORRECT, "sdpa", level="strict", limits=LIMITS, device="cuda") as s:
        q, k, v = _qkv()
        r = s.call(q, k, v)
    assert r.ok and r.output_device.startswith("cuda")
    assert torch.allclose(r.output, _expected(q, k, v), atol=1e-5)


# -- small parts ----------------------------------------------------------------------------------
def test_limits_read_the_environment_when_created(monkeypatch):
    monkeypatch.setenv("ATTN_GRADER_SANDBOX_CPU_SECONDS", "7")
    assert Limits().cpu_seconds == 7 and Limits(cpu_seconds=3).cpu_seconds == 3
    monkeypatch.setenv("ATTN_GRADER_SANDBOX_CPU_SECONDS", "lots")
    with pytest.raises(ValueError, match="ATTN_GRADER_SANDBOX_CPU_SECONDS='lots': expected an integer"):
        Limits()


@needs_strict
def test_seccomp_program_compiles():
    import importlib.util
    spec = importlib.util.spec_from_file_location("_iso", os.path.join(os.path.dirname(wall.__file__),
                                                                      "isolate.py"))
    iso = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(iso)
    program = iso.seccomp_program("deny-list")
    assert len(program) > 8 * len(iso.policy.SECCOMP_DENIED) and len(program) % 8 == 0
    program = iso.seccomp_program("allow-list")
    assert len(program) > 8 * len(iso.policy.SECCOMP_ALLOWED) and len(program) % 8 == 0


def _fake_cgroupfs(tmp_path, mount_lines, own):
    mountinfo, cgroup_file = tmp_path / "mountinfo", tmp_path / "cgroup"
    mountinfo.write_text("".join(f"{30 + i} 25 0:{26 + i} / {line}\n" for i, line in enumerate(mount_lines)))
    cgroup_file.write_text(own)
    return {"mountinfo": str(mountinfo), "cgroup_file": str(cgroup_file)}


def test_cgroup_v2_is_detected_and_delegated(tmp_path):
    svc = tmp_path / "cg" / "grader.service"
    svc.mkdir(parents=True)
    (svc / "cgroup.controllers").write_text("cpu memory pids\n")
    files = _fake_cgroupfs(tmp_path, [f"{tmp_path / 'cg'} rw,nosuid shared:4 - cgroup2 cgroup2 rw"],
                           "0::/grader.service\n")
    version, bases = cgroups.detect(**files)
    assert version == "v2" and bases == {"unified": str(svc / "attn-sandbox")}
    assert (svc / "cgroup.subtree_control").read_text() == "+memory +pids +cpu"
    assert (svc / "attn-sandbox" / "cgroup.subtree_control").read_text() == "+memory +pids +cpu"


def test_cgroup_v1_is_preferred_when_its_controllers_are_mounted(tmp_path):
    for c in ("memory", "pids"):
        (tmp_path / c / "svc").mkdir(parents=True)
    files = _fake_cgroupfs(tmp_path, [f"{tmp_path / 'memory'} rw - cgroup cgroup rw,memory",
                                      f"{tmp_path / 'pids'} rw - cgroup cgroup rw,pids",
                                      f"{tmp_path / 'unified'} rw - cgroup2 cgroup2 rw"],
                           "5:memory:/svc\n3:pids:/svc\n0::/\n")
    version, bases = cgroups.detect(**files)
    assert version == "v1"
    assert bases == {c: str(tmp_path / c / "svc" / "attn-sandbox") for c in ("memory", "pids")}


def test_no_usable_cgroup_is_named(tmp_path):
    (tmp_path / "cg").mkdir()
    (tmp_path / "cg" / "cgroup.controllers").write_text("cpu hugetlb\n")
    files = _fake_cgroupfs(tmp_path, [f"{tmp_path / 'cg'} rw - cgroup2 cgroup2 rw"], "0::/\n")
    with pytest.raises(cgroups.CgroupUnavailable, match="memory and pids"):
        cgroups.detect(**files)


@needs_strict
def test_run_cgroups_of_dead_graders_are_removed():
    _, bases = cgroups.detect()
    stale = [os.path.join(base, "run-4194399-0") for base in bases.values()]  # above any pid_max
    for d in stale:
        os.mkdir(d)
    cgroups.detect(refresh=True)
    assert not any(os.path.exists(d) for d in stale)


def test_a_run_cgroup_that_is_busy_is_retried_not_forgotten(monkeypatch):
    """A process slow to die keeps its cgroup busy: the janitor retries; the uid waits for it."""
    from grader.sandbox import runs
    monkeypatch.setattr(runs.Janitor, "RETRY_SECONDS", 0.05)

    class SlowCgroup:
        dirs = ["/sys/fs/cgroup/pids/attn-sandbox/run-test"]
        busy, attempts = True, 0

        def kill(self, timeout=5.0):
            return True

        def remove(self, timeout=5.0):
            self.attempts += 1
            return not self.busy

        def describe(self):
            return self.dirs[0] + ": 4242 D python3"

    class FakeSlot:
        released = False

        def release(self):
            self.released = True

    janitor, cgroup, slot = runs.Janitor(), SlowCgroup(), FakeSlot()
    janitor.submit(cgroup, slot)
    assert not janitor.drain(0.5)  # still busy: not torn down, and drain says so
    assert janitor.lingering and cgroup.attempts > 2 and not slot.released  # retried; uid not reused
    cgroup.busy = False  # the last process is finally gone
    assert janitor.drain(5.0)
    assert slot.released and janitor.lingering == []
