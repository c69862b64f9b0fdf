"""``--sandbox local``: the student's own pre-check, children forked from a warm process.

Every other level starts a fresh interpreter somewhere (the zygote, or one per child), and
each of those imports torch again: on a laptop that doubled what ``attn-grader check`` costs.
A student's machine needs no wall against its owner, so here the children are forked from a
small fork server that is itself forked from the grading process after it imported torch.

The verdicts stay the server's: the parent runs the same checks with the same inputs, and
each child runs the same harness (``harness.py``) with the environment, thread count and
resource limits of the sandboxed levels. What differs is only how a child starts, and what
it could reach (everything its owner can: this level is not for untrusted code, and the
service refuses it).

Fork safety: the fork server is forked while the grading process is single-threaded and has
run no torch operation (``prepare``, called by the CLI before its progress bar starts); it
runs its one warm-up with one thread, as the zygote does, and forks each child from there.
"""
from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import select
import signal
import socket
import sys
import threading

from . import policy
from ..i18n import T
from .backends import GRADER_STOPPED, SandboxChild, SandboxUnavailable, describe_status
from .limits import Limits

HERE = os.path.dirname(os.path.abspath(__file__))
BLOCKED = ("grader", "reference_impl")  # what a submission must not find already imported
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _load_harness():
    spec = importlib.util.spec_from_file_location("_attn_harness", os.path.join(HERE, "harness.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _close_fds_above(highest: int) -> None:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > highest:
            try:
                os.close(fd)
            except OSError:
                pass  # the listing's own fd, already gone


def _become_harness(harness, request: dict, fds: list[int]) -> None:
    """In the forked child: the sandboxed levels' process state, then the harness. Never returns."""
    import fcntl
    import io

    import torch

    os.setsid()
    _die_with_parent()
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in fds]  # above 4: no target clobbered
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    for source, target in zip(high, (3, 4, 1, 2)):  # request, response, stdout, stderr
        os.dup2(source, target)
    _close_fds_above(4)
    harness._apply_rlimits(request["rlimits"])
    for name in list(sys.modules):  # the grader's own modules came with the fork: unload them
        if name.split(".")[0] in BLOCKED:
            del sys.modules[name]
    # Fresh streams: the parent's may hold unflushed text or a lock taken by another thread.
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)),
                                  encoding="utf-8")
    sys.stderr = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
                                  encoding="utf-8", errors="backslashreplace")
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)))
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir("/tmp")
    torch.set_num_threads(int(request.get("threads", 1)))
    sys.argv = ["submission"]
    harness.serve()
    os._exit(0)


def _fork_server(sock: socket.socket, harness) -> None:
    """The fork server's loop: a child per request, its exit status to its status pipe."""
    _die_with_parent()
    import torch

    torch.set_num_threads(1)
    harness.warm_up()  # lazy imports (sympy under backward) once, not in every child
    harness.disarm.disarm()  # torch's own attention off (its kernels trapped) in every child, paid once here
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    statuses: dict[int, int] = {}  # child pid -> its status pipe
    sock.send(b'{"ready": true}')
    while True:
        readable, _, _ = select.select([sock, wake_r], [], [])
        if wake_r in readable:
            os.read(wake_r, 4096)
        while statuses:
            try:
                pid, wstatus = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            code = -os.WTERMSIG(wstatus) if os.WIFSIGNALED(wstatus) else os.WEXITSTATUS(wstatus)
            fd = statuses.pop(pid, None)
            if fd is not None:
                try:
                    os.write(fd, (json.dumps({"exit": code}) + "\n").encode())
                finally:
                    os.close(fd)
        if sock not in readable:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(sock, 65536, 8)
        except OSError:
            os._exit(0)
        if not data:
            os._exit(0)  # the grading process is gone; the children die with us
        request = json.loads(data)
        pid = os.fork()
        if pid == 0:
            try:
                sock.close()
                _become_harness(harness, request, fds[:4])
            finally:
                os._exit(120)
        statuses[pid] = fds[4]
        for fd in fds[:4]:
            os.close(fd)
        sock.send(json.dumps({"pid": pid}).encode())


class ForkServer:
    def __init__(self):
        # Imports are fork-safe (torch operations are not): the lazy ones that the first
        # backward pulls in (sympy, a quarter of a second) happen here once, for this
        # process's own gradient checks and for every child alike.
        import torch.fx.experimental.symbolic_shapes  # noqa: F401

        harness = _load_harness()
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                parent.close()
                # Copies of the grading process's other descriptors (another sandbox's
                # control socket, a child's pipes) would keep them open after it closes them.
                for name in os.listdir("/proc/self/fd"):
                    if int(name) > 2 and int(name) != child.fileno():
                        try:
                            os.close(int(name))
                        except OSError:
                            pass
                _fork_server(child, harness)
            finally:
                os._exit(1)
        child.close()
        self.pid, self.sock = pid, parent
        self.lock = threading.Lock()
        self.sock.settimeout(120)
        try:
            ready = self.sock.recv(256)
        except OSError:
            ready = b""
        if not ready:
            self.close()
            raise SandboxUnavailable("the local fork server did not start")
        self.sock.settimeout(30)

    def alive(self) -> bool:
        try:
            return os.waitpid(self.pid, os.WNOHANG)[0] == 0
        except ChildProcessError:
            return False

    def spawn(self, request: dict, fds: list[int]) -> int:
        with self.lock:
            socket.send_fds(self.sock, [json.dumps(request).encode()], fds)
            reply = self.sock.recv(256)
        if not reply:
            raise SandboxUnavailable("the local fork server went away")
        return json.loads(reply)["pid"]

    def close(self) -> None:
        self.sock.close()
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


_server: ForkServer | None = None
_server_lock = threading.Lock()


def prepare() -> ForkServer:
    """Start (once per process) the fork server; call while this process is single-threaded."""
    global _server
    with _server_lock:
        if _server is None or not _server.alive():
            _server = ForkServer()
        return _server


def _forget_after_fork() -> None:
    global _server, _server_lock
    _server, _server_lock = None, threading.Lock()  # a forked process starts its own


os.register_at_fork(after_in_child=_forget_after_fork)


class LocalChild(SandboxChild):
    """One forked child running the harness, with its pipes and output captures."""

    def __init__(self, server: ForkServer, limits: Limits, device: str):
        req_r, req_w = os.pipe()
        res_r, res_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        status_r, status_w = os.pipe()
        theirs = [req_r, res_w, out_w, err_w, status_w]
        try:
            self.pid = server.spawn({"rlimits": policy.rlimits(limits, device),
                                     "env": policy.child_env(device, 1),
                                     "threads": 1}, theirs)
        except BaseException:
            for fd in theirs + [req_w, res_r, out_r, err_r, status_r]:
                os.close(fd)
            raise
        for fd in theirs:
            os.close(fd)
        self.request_fd, self.response_fd, self.status_fd = req_w, res_r, status_r
        self.exit: int | None = None
        self.stopped = False  # killed by the grader (its time ran out), not by the kernel
        self._capture(out_r, err_r, limits)

    def _read_status(self, timeout: float) -> None:
        if self.exit is not None or self.status_fd < 0:
            return
        readable, _, _ = select.select([self.status_fd], [], [], max(0.0, timeout))
        if readable:
            line = os.read(self.status_fd, 256)
            try:
                self.exit = int(json.loads(line)["exit"])
            except (ValueError, KeyError, TypeError):
                self.exit = -signal.SIGKILL  # the fork server itself died: so did the child

    def wait_exit(self, timeout: float) -> str:
        self._read_status(timeout)
        return describe_status(self.exit)

    def describe_exit(self) -> str:
        self._read_status(0.0)
        return GRADER_STOPPED if self.stopped else describe_status(self.exit)

    def kill(self) -> None:
        self._read_status(0.0)
        if self.exit is None:
            self.stopped = True
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self._read_status(10.0)
        self._close("request_fd", "response_fd", "status_fd")
        self._join_output()


class LocalBackend:
    """Children forked from this process's fork server (CPU); a fresh interpreter for CUDA,
    whose state must never be forked."""

    level = "local"

    def __init__(self, limits: Limits, device: str):
        self.limits, self.device = limits, device
        self.warnings = [T("local pre-check: your code runs as you, without isolation "
                           "(the server grades it in its sandbox)")]
        if not str(device).startswith("cuda"):
            self.server = prepare()

    def spawn(self, submission_dir: str):
        if str(self.device).startswith("cuda"):
            from .backends import PlainChild

            return PlainChild(self.limits, self.device, apply_rlimits=True)
        for attempt in (0, 1):
            try:
                return LocalChild(self.server, self.limits, self.device)
            except (OSError, SandboxUnavailable):
                if attempt:
                    raise
                self.server = prepare()  # it died: a fresh one
        raise AssertionError("unreachable")
