"""The grader's side of the fork server: a lazily started, shared, self-healing zygote.

One zygote per grader process (per kind: with or without the bubblewrap wall, with
or without GPU devices) serves every ``SandboxSession`` of that process, from any thread.
A dead zygote is restarted on the next request; a forked grader process starts its
own. Each run gets its own cgroup, slot uid and pipes; ``StrictChild`` owns them and
tears everything down in ``kill``.
"""
from __future__ import annotations

import atexit
import json
import os
import select
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import torch

from . import policy, wire
from .backends import MEMORY_KILLED, OutputCapture, SandboxChild, SandboxUnavailable, describe_status
from .cgroups import RunCgroup, detect
from .limits import Limits
from .runs import UID_BASE, UID_SLOTS, Janitor, Slot  # noqa: F401  (UID_*: tests, docs)
from .wall import zygote_command

START_TIMEOUT = 120.0


class ZygoteLost(ConnectionError):
    """The fork server died or stopped answering; the next request starts a new one."""


class Zygote:
    def __init__(self, wall: bool, gpu: bool, tmp_size: int):
        self.wall, self.gpu, self.lost = wall, gpu, False
        self.lock = threading.Lock()
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = parent
        cmd = zygote_command(child.fileno(), wall=wall, gpu=gpu, tmp_size=tmp_size)
        from .wall import zygote_env
        # Our own pipe, not stderr=PIPE: the capture closes its fd when the zygote exits, and a
        # Popen-owned file object would close the same number again when garbage-collected,
        # by then perhaps another thread's fd (a run's pipe or cgroup handle).
        log_r, log_w = os.pipe()
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=log_w, pass_fds=(child.fileno(),), env=zygote_env(),
                                         cwd="/", start_new_session=True)
        except BaseException:
            os.close(log_r)
            raise
        finally:
            os.close(log_w)
            child.close()
        self.log = OutputCapture(log_r, 64 * 1024)
        self.log.start()
        self.sock.settimeout(START_TIMEOUT)
        try:
            hello = json.loads(self.sock.recv(65536) or b"{}")
        except (OSError, ValueError):
            hello = {}
        if not hello.get("ready"):
            self.close()
            self.log.join(2)
            detail = hello.get("error") or self.log.text()[-2000:] or describe_status(self.proc.poll())
            raise SandboxUnavailable(f"the sandbox's fork server did not start: {detail}")
        self.sock.settimeout(30)

    def alive(self) -> bool:
        return not self.lost and self.proc.poll() is None

    def spawn(self, request: dict, fds: list[int]) -> int:
        with self.lock:
            try:
                socket.send_fds(self.sock, [json.dumps(request).encode()], fds)
                reply = self.sock.recv(65536)
            except OSError as exc:  # includes a timeout: a reply arriving later would desynchronise us
                self.lost = True
                raise ZygoteLost(f"the fork server stopped answering: {exc}") from None
        if not reply:
            self.lost = True
            raise ZygoteLost("the fork server closed its control channel")
        answer = json.loads(reply)
        if "pid" not in answer:
            raise SandboxUnavailable(f"the fork server refused: {answer.get('error')}")
        return answer["pid"]

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


_zygotes: dict = {}
_warm_pools: dict = {}
_registry_lock = threading.Lock()
# bwrap --die-with-parent is PR_SET_PDEATHSIG, which follows the *thread* that forked it: a zygote
# started from a request's short-lived thread died with that thread (measured). So zygotes are
# always started from this one long-lived thread.
_launcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox-launcher")


def _forget_after_fork() -> None:
    # A forked grader must not share its parent's control socket: it starts its own zygote.
    global _zygotes, _registry_lock, _launcher
    for z in _zygotes.values():
        try:
            z.sock.close()
        except OSError:
            pass
    _zygotes, _registry_lock = {}, threading.Lock()
    _launcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox-launcher")
    _warm_pools.clear()  # their children belong to the parent process
    global janitor
    janitor = Janitor()  # the parent's janitor thread does not exist here


os.register_at_fork(after_in_child=_forget_after_fork)


def get_zygote(wall: bool, gpu: bool, limits: Limits) -> Zygote:
    key = (wall, gpu)
    with _registry_lock:
        z = _zygotes.get(key)
        if z is None or not z.alive():
            if z is not None:
                z.close()
            z = _zygotes[key] = _launcher.submit(Zygote, wall, gpu, limits.tmp_size).result()
            _probe(z, limits)
        return z


def warm_pool_for(key, make):
    """This process's warm pool for ``key``, made by ``make()`` on first use; ``shutdown``
    closes them, and a forked grader starts without its parent's."""
    with _registry_lock:
        pool = _warm_pools.get(key)
        if pool is None:
            pool = _warm_pools[key] = make()
        return pool


def _probe(z: Zygote, limits: Limits) -> None:
    """A first child proves every layer works on this host before any student relies on it."""
    child = StrictChild(z, limits, "cpu", None)
    try:
        error = child.wait_ready(START_TIMEOUT)
    finally:
        child.kill()
    if error:
        z.close()
        _zygotes.pop((z.wall, z.gpu), None)
        raise SandboxUnavailable(f"the sandbox could not isolate a test process: {error}")


def shutdown() -> None:
    """Stop every pre-warmed worker and zygote of this process (tests, exit)."""
    for pool in list(_warm_pools.values()):
        pool.close()
    _warm_pools.clear()
    janitor.drain()
    with _registry_lock:
        for z in _zygotes.values():
            z.close()
        _zygotes.clear()


child_env = policy.child_env  # tests and the local level use it from here


class StrictChild(SandboxChild):
    """One walled-in child: its cgroup, slot uid, pipes and output captures."""

    def __init__(self, zygote: Zygote, limits: Limits, device: str, submission_dir: str | None,
                 warm: bool = False, threads: int = 1):
        self.limits, self.killed, self.exit, self.setup_error, self.ready = limits, False, None, None, False
        self.threads = threads  # the cores its cgroup may use (waiting.py reads it)
        self.cpu, self.closed, self.oom, self.pids_hit = 0.0, False, False, False
        version, bases = detect()
        self.slot = Slot()
        try:
            self.cgroup = RunCgroup(version, bases, policy.cgroup_limits(limits, threads))
        except BaseException:
            self.slot.release()
            raise
        # Anything failing from here on (fds exhausted, the zygote lost) hands the run to the
        # janitor, which kills whatever started and removes the cgroup: nothing is left behind.
        pipes, extra = [], []
        try:
            for _ in range(5):  # request, response, stdout, stderr, status
                pipes.append(os.pipe())
            names = sorted(os.listdir(submission_dir)) if submission_dir else []
            names = [n for n in names if os.path.isfile(os.path.join(submission_dir, n))]
            names = names[:policy.SUBMISSION_FILES]
            child_ends = [pipes[0][0], pipes[1][1], pipes[2][1], pipes[3][1], pipes[4][1]]
            extra += self.cgroup.join_fds()
            extra += [os.open(os.path.join(submission_dir, n), os.O_RDONLY | os.O_CLOEXEC) for n in names]
            request = {"uid": self.slot.uid, "n_cgroup": len(self.cgroup.dirs), "files": names,
                       "tmp_size": limits.tmp_size, "memory_bytes": limits.memory_bytes,
                       "device": device, "warm": warm, "threads": threads,
                       "env": policy.child_env(device, threads), "seccomp": policy.seccomp_mode(device),
                       "rlimits": policy.rlimits(limits, device, memory_cgroup=True)}
            self.pid = zygote.spawn(request, child_ends + extra)
        except BaseException:
            for pair in pipes:
                for fd in pair:
                    os.close(fd)
            self._cleanup_cgroup()
            raise
        finally:
            for fd in extra:
                os.close(fd)
        for fd in child_ends:
            os.close(fd)
        self.request_fd, self.response_fd, self.status_fd = pipes[0][1], pipes[1][0], pipes[4][0]
        self._status_buf = b""
        self._capture(pipes[2][0], pipes[3][0], limits)

    # -- status pipe: "ready", then the exit status, both from trusted processes ----------
    def _read_status(self, timeout: float) -> None:
        """Take in what the status pipe has: waits up to ``timeout`` for the first news, not more."""
        deadline = time.monotonic() + timeout
        while self.status_fd >= 0:
            left = max(0.0, deadline - time.monotonic())
            if not select.select([self.status_fd], [], [], left)[0]:
                return
            chunk = os.read(self.status_fd, 4096)
            if not chunk:
                os.close(self.status_fd)
                self.status_fd = -1
                return
            self._status_buf += chunk
            while b"\n" in self._status_buf:
                line, self._status_buf = self._status_buf.split(b"\n", 1)
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                self.ready = self.ready or bool(msg.get("ready"))
                if "setup_error" in msg:
                    self.setup_error = str(msg["setup_error"])
                if "exit" in msg:
                    self.exit, self.cpu = int(msg["exit"]), float(msg.get("cpu", 0.0))
            deadline = time.monotonic()  # news arrived: drain what is there, wait no longer

    def wait_ready(self, timeout: float) -> str | None:
        """Block until the child is walled in and waiting (pre-warmed workers); an error or None."""
        deadline = time.monotonic() + timeout
        while not self.ready and self.setup_error is None and self.exit is None and self.status_fd >= 0:
            left = deadline - time.monotonic()
            if left <= 0:
                return "timed out while setting up"
            self._read_status(min(left, 0.5))
        if self.ready:
            return None
        return self.setup_error or f"the child ended during set-up ({self.describe_exit()})"

    def attach(self, submission_dir: str, timeout: float) -> None:
        """Hand a pre-warmed child its submission (over the pipe: its /sub was sealed empty)."""
        files = {}
        for name in sorted(os.listdir(submission_dir))[:policy.SUBMISSION_FILES]:
            with open(os.path.join(submission_dir, name), "rb") as f:
                data = f.read(policy.SUBMISSION_FILE_BYTES)
            files[policy.SUBMISSION_DIR + "/" + name] = torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else \
                torch.empty(0, dtype=torch.uint8)
        deadline = time.monotonic() + timeout
        wire.write_message(self.request_fd, {"op": "files", "files": files}, deadline=deadline)
        answer = wire.read_message(self.response_fd, deadline=deadline)
        if not answer.get("ok"):
            raise SandboxUnavailable(f"the pre-warmed worker refused the submission: {answer}")

    # -- the interface SandboxSession uses ----------------------------------------------------
    def path_of(self, host_path: str) -> str:
        return policy.SUBMISSION_DIR + "/" + os.path.basename(host_path)

    def wait_exit(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while self.exit is None and self.setup_error is None and self.status_fd >= 0:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._read_status(left)
        return self.describe_exit()

    def describe_exit(self) -> str:
        self._read_status(0)
        if self.setup_error:
            return f"the sandbox could not be set up: {self.setup_error}"
        if self.oom or (not self.closed and self.cgroup.oom_killed()):
            return f"{MEMORY_KILLED} ({self.limits.memory_bytes / 2**30:.1f} GiB) exceeded"
        if self.exit is None:
            return "killed by the grader at the time limit" if self.killed else "still running"
        # rusage under-reports against the scheduler's clock that RLIMIT_CPU uses (measured: 2.57 s
        # reported for a 3 s limit on a loaded VM); nothing else here sends SIGKILL after so much CPU.
        if self.exit == -9 and self.cpu >= 0.75 * self.limits.cpu_seconds:
            return f"killed: CPU time limit ({self.limits.cpu_seconds} s) exceeded"
        text = describe_status(self.exit)
        if self.exit == -9:
            text = "killed (SIGKILL)"
        if self.pids_hit or (not self.closed and self.cgroup.fork_limit_hit()):
            text += f"; it hit the limit of {self.limits.processes} processes"
        return text

    # The harness flushes the student's prints before every answer, so nothing is lost by
    # killing instead of asking the child to exit (which costs a round trip and an exit).
    polite_exit = False

    def kill(self) -> None:
        """Kill every process of the run and close every pipe; the janitor removes the cgroup."""
        if self.closed:
            return
        self.killed = self.killed or self.exit is None
        self._close("request_fd", "response_fd")
        self.cgroup.signal_all()
        # What the run printed up to now is in the pipes (the harness flushes before answering):
        # take it without waiting for the processes to finish dying, which the janitor does.
        self.out.sync()
        self.err.sync()
        self._read_status(0)
        self.oom, self.pids_hit = self.cgroup.oom_killed(), self.cgroup.fork_limit_hit()
        self.closed = True
        janitor.submit(self.cgroup, self.slot, (self.out, self.err), self.status_fd)
        self.status_fd = -1

    def wait_gone(self, timeout: float) -> bool:
        """After ``kill``: wait until the janitor has torn the run down (its processes may need
        seconds of CPU to exit on a loaded host)."""
        return janitor.wait_gone(self.cgroup, timeout)

    def _cleanup_cgroup(self) -> None:
        self.closed = True
        janitor.submit(self.cgroup, self.slot)  # kills whatever started, removes, frees the uid


janitor = Janitor()


def drain(timeout: float = 10.0) -> bool:
    """Wait until every finished run is fully torn down (tests, shutdown)."""
    return janitor.drain(timeout)


atexit.register(shutdown)
