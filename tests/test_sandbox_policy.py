"""The sandbox policy in one place: what the layers apply is what ``policy`` declares, the
``sandbox policy`` command prints it, and the child sees it (masked /proc, CPU cgroup)."""
import json
import os

import pytest
from click.testing import CliRunner

from grader import settings
from grader.cli import main
from grader.sandbox import Limits, SandboxSession, cgroups, forkserver, policy, wall

STRICT_PROBLEMS = wall.strict_problems()
needs_strict = pytest.mark.skipif(bool(STRICT_PROBLEMS),
                                  reason="strict sandbox unavailable: " + "; ".join(STRICT_PROBLEMS))
LIMITS = Limits(cpu_seconds=5, wall_seconds=20, call_seconds=5, load_seconds=10, memory_bytes=1 << 30)


# -- the command -----------------------------------------------------------------------------
def test_policy_json_is_the_module_s_description():
    result = CliRunner().invoke(main, ["sandbox", "policy", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == json.loads(json.dumps(policy.describe()))


def test_policy_text_shows_every_layer_from_the_module(monkeypatch):
    monkeypatch.setenv("ATTN_GRADER_SANDBOX_MEMORY_BYTES", str(3 << 30))
    result = CliRunner().invoke(main, ["sandbox", "policy", "--threads", "2"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())  # wrapped lists read as one line
    for name in policy.SECCOMP_DENIED + policy.CHILD_NAMESPACES + policy.WALL_CAPS + policy.DEV_NODES:
        assert name in text
    for name in policy.MASKED_PROC_FILES + policy.OS_TREES:
        assert name in text
    assert "memory_bytes: 3221225472 (3 GiB)" in text and "cpu_cores: 2" in text
    assert f"first: {forkserver.UID_BASE}" in text and f"count: {forkserver.UID_SLOTS}" in text
    for key, value in policy.child_env("cpu").items():
        assert f"{key}: {value}" in text


def test_policy_command_refuses_a_bad_thread_count():
    result = CliRunner().invoke(main, ["sandbox", "policy", "--threads", "0"])
    assert result.exit_code == 2 and "--threads" in result.output


def test_policy_command_names_a_malformed_setting(monkeypatch):
    monkeypatch.setenv("ATTN_GRADER_SANDBOX_SECCOMP", "strictest")
    result = CliRunner().invoke(main, ["sandbox", "policy"])
    assert result.exit_code == 1 and "ATTN_GRADER_SANDBOX_SECCOMP='strictest'" in result.output


# -- the layers read it ------------------------------------------------------------------------
def test_the_wall_argv_applies_the_policy():
    argv = wall.zygote_command(3, wall=True, gpu=False, tmp_size=policy.GiB)
    caps = [argv[i + 1] for i, a in enumerate(argv) if a == "--cap-add"]
    assert caps == list(policy.WALL_CAPS) and "--cap-drop" in argv
    assert {a[len("--unshare-"):].replace("-try", "") for a in argv if a.startswith("--unshare-")} \
        == set(policy.WALL_NAMESPACES)
    env = {argv[i + 1]: argv[i + 2] for i, a in enumerate(argv) if a == "--setenv"}
    assert env == policy.zygote_env()
    for tree in policy.OS_TREES:
        assert argv[argv.index(tree) - 1] == "--ro-bind"


def test_rlimits_and_environment_are_one_definition():
    limits = Limits()
    assert policy.rlimits(limits, "cpu")["data"] == limits.memory_bytes
    assert policy.rlimits(limits, "cuda")["data"] == limits.memory_bytes  # no cgroup: keep the bound
    assert policy.rlimits(limits, "cuda", memory_cgroup=True)["data"] is None
    assert set(policy.rlimits(limits)) == set(policy.RLIMIT_NAMES)
    assert forkserver.child_env is policy.child_env and wall.zygote_env is policy.zygote_env
    env = policy.child_env("cpu", 3)
    assert all(env[var] == "3" for var in policy.THREAD_VARS) and "CUDA_VISIBLE_DEVICES" not in env


def test_masked_proc_files_describe_the_run():
    files = policy.masked_proc_files(1 << 30, {0, 3})
    assert set(files) == set(policy.MASKED_PROC_FILES)
    assert "MemTotal:        1048576 kB" in files["meminfo"].splitlines()
    assert [line.split()[0] for line in files["stat"].splitlines()[:3]] == ["cpu", "cpu0", "cpu3"]


# -- inside a child ----------------------------------------------------------------------------
PROC_PROBE = r'''
import os
def sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    seen = {}
    for name in ("loadavg", "meminfo", "stat", "uptime", "mounts", "self/mountinfo", "self/mounts"):
        with open("/proc/" + name) as f:
            seen[name] = f.read()
    seen["cpu_count"] = os.cpu_count()
    seen["root"] = sorted(os.listdir("/"))
    print(repr(seen))
    return q
'''


@needs_strict
def test_host_wide_proc_files_are_masked_inside_the_child():
    import torch
    q = torch.ones(1, 1, 2, 2)
    with SandboxSession(PROC_PROBE, "sdpa", level="strict", limits=LIMITS) as s:
        assert s.call(q, q, q).ok, s.stderr
        seen = eval(s.stdout.strip().splitlines()[-1])  # our own probe's repr of plain literals
    expected = policy.masked_proc_files(LIMITS.memory_bytes, os.sched_getaffinity(0))
    assert seen["loadavg"] == expected["loadavg"] and seen["uptime"] == expected["uptime"]
    assert seen["meminfo"] == expected["meminfo"]
    assert seen["stat"].startswith("cpu ") and "intr 0" in seen["stat"]
    assert seen["mounts"] == seen["self/mountinfo"] == seen["self/mounts"] == ""
    assert seen["cpu_count"] and seen["cpu_count"] >= 1
    assert ".proc-masks" not in seen["root"]


@needs_strict
def test_run_cgroups_cap_cpu_where_the_host_has_the_controller():
    _, bases = cgroups.detect()
    if "cpu" not in bases and not os.path.exists(os.path.join(next(iter(bases.values())), "cpu.max")):
        pytest.skip("this host has no cpu cgroup controller")
    run = cgroups.RunCgroup(*cgroups.detect(), policy.cgroup_limits(LIMITS, threads=2))
    try:
        assert run.cpu_limited()
        if "cpu" in run.by_controller:
            with open(os.path.join(run.by_controller["cpu"], "cpu.cfs_quota_us")) as f:
                assert int(f.read()) == 2 * policy.CPU_PERIOD_US
        else:
            with open(os.path.join(run.dirs[0], "cpu.max")) as f:
                assert f.read().split() == [str(2 * policy.CPU_PERIOD_US), str(policy.CPU_PERIOD_US)]
    finally:
        assert run.remove()


# -- seccomp -----------------------------------------------------------------------------------
def test_the_allow_list_and_the_deny_list_do_not_overlap():
    allowed = (set(policy.SECCOMP_ALLOWED) | set(policy.SECCOMP_ALLOWED_GPU) | {"socket", "clone", "ioctl", "prctl"}
               | set(policy.EXEC_MAPPING_CALLS))
    assert allowed.isdisjoint(policy.SECCOMP_DENIED)
    assert {"execve", "execveat", "clone3", "ptrace", "unshare"}.isdisjoint(policy.SECCOMP_ALLOWED)
    assert set(policy.IOCTLS_ALLOWED.values()).isdisjoint(policy.IOCTLS_DENIED.values())
    # allowed only with argument rules (isolate.seccomp_program): never unconditionally
    assert {"mmap", "mprotect", "prctl", "pkey_mprotect", "personality"}.isdisjoint(policy.SECCOMP_ALLOWED)


def test_seccomp_mode_is_a_setting_with_a_clear_error(monkeypatch):
    assert policy.seccomp_mode("cpu") == settings.setting("SANDBOX_SECCOMP").default == "allow-list"
    assert settings.setting("SANDBOX_SECCOMP").choices == policy.SECCOMP_MODES  # the zygote compiles each
    assert policy.seccomp_mode("cuda") == "deny-list"  # until CUDA's calls are measured
    monkeypatch.setenv("ATTN_GRADER_SANDBOX_SECCOMP", "deny-list")
    assert policy.seccomp_mode("cpu") == "deny-list"
    monkeypatch.setenv("ATTN_GRADER_SANDBOX_SECCOMP", "paranoid")
    with pytest.raises(ValueError, match="SECCOMP='paranoid': expected allow-list, deny-list or log"):
        policy.seccomp_mode()


SYSCALL_PROBE = r'''
import ctypes, errno, fcntl, os, socket, threading
libc = ctypes.CDLL(None, use_errno=True)
def outcome(result):
    return "ok" if result >= 0 else errno.errorcode[ctypes.get_errno()]
def sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    seen = {}
    seen["personality"] = outcome(libc.syscall(135, ctypes.c_ulong(0xffffffff)))   # x86_64 personality
    seen["execve"] = outcome(libc.execv(b"/usr/bin/true", (ctypes.c_char_p * 2)(b"true", None)))
    seen["unshare_user"] = outcome(libc.unshare(0x10000000))
    r, w = os.pipe()
    for name, request in (("tiocsti", 0x5412), ("tiocsti_high_bits", 0x100005412), ("fionread", 0x541B)):
        seen[name] = outcome(libc.syscall(16, r, ctypes.c_ulong(request), ctypes.byref(ctypes.c_int(0))))
    for family in ("AF_INET", "AF_UNIX"):
        try:
            socket.socket(getattr(socket, family)).close()
            seen[family] = "ok"
        except OSError as exc:
            seen[family] = errno.errorcode[exc.errno]
    box = []
    t = threading.Thread(target=lambda: box.append(1))
    t.start(); t.join()
    seen["thread"] = box == [1]
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    seen["fork"] = os.waitpid(pid, 0)[1] >> 8
    print(repr(seen))
    return q
'''


@needs_strict
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the probe uses x86_64 syscall numbers")
def test_the_allow_list_refuses_what_it_does_not_name_and_keeps_what_python_needs():
    import torch
    q = torch.ones(1, 1, 2, 2)
    with SandboxSession(SYSCALL_PROBE, "sdpa", level="strict", limits=LIMITS) as s:
        assert s.call(q, q, q).ok, s.stderr
        seen = eval(s.stdout.strip().splitlines()[-1])  # our own probe's repr of plain literals
    assert seen["personality"] == seen["execve"] == "ENOSYS"   # not on the list
    assert seen["unshare_user"] == "ENOSYS"
    assert seen["tiocsti"] == seen["tiocsti_high_bits"] == "ENOSYS" and seen["fionread"] == "ok"
    assert seen["AF_INET"] == "EAFNOSUPPORT" and seen["AF_UNIX"] == "ok"
    assert seen["thread"] is True and seen["fork"] == 7
