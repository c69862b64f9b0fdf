"""How a sandboxed child is made, by isolation level.

- ``none``: a plain subprocess (debugging only).
- ``auto``: the strongest layer this host offers; a plain subprocess with rlimits
  where nothing stronger exists, with a warning.
- ``strict``: every layer or nothing: refuses with a message naming what is missing.
- ``local``: the student's own pre-check: children forked from a warm process, no
  isolation (see ``local``); never accepted by the service.
"""
from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import struct
import subprocess
import sys
import termios
import threading

from . import policy
from ..i18n import T
from .limits import Limits

HARNESS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "harness.py")


class SandboxUnavailable(RuntimeError):
    """The requested isolation level cannot be provided on this host."""


class OutputCapture(threading.Thread):
    """Keeps the first ``cap`` bytes of a pipe and drains (and counts) the rest.

    The pipe is never closed early: a student whose function prints a lot must not get a
    BrokenPipeError from its own print, which would fail every check of a correct file.
    ``text()`` first takes in whatever is already in the pipe: the harness flushes the
    student's prints before each answer, so after an answer the capture is exact.
    """

    DRAIN_BYTES = 1 << 20  # pipe size, and bytes moved per wake-up once past the cap

    def __init__(self, fd: int, cap: int):
        super().__init__(daemon=True)
        self.fd, self.cap, self.data, self.dropped = fd, cap, bytearray(), 0
        self.lock = threading.Lock()
        os.set_blocking(fd, False)  # reads happen only when select or FIONREAD says there is data
        try:  # fewer wake-ups for a child that prints a lot
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, self.DRAIN_BYTES)
        except (OSError, AttributeError):
            pass
        self._null = -1

    @property
    def truncated(self) -> bool:
        return self.dropped > 0

    def _take(self, chunk: bytes) -> None:
        room = max(0, self.cap - len(self.data))
        self.data += chunk[:room]
        self.dropped += max(0, len(chunk) - room)

    def _discard(self) -> int:
        """Past the cap: move what waits in the pipe to /dev/null in the kernel (a flood of 400 MB
        read here 64 KiB at a time held the child up when this process was short of CPU, and the
        child was charged for it). Returns the bytes moved (0 at EOF)."""
        if self._null < 0:
            self._null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        moved = os.splice(self.fd, self._null, self.DRAIN_BYTES)
        self.dropped += moved
        return moved

    def run(self) -> None:
        try:
            while True:
                select.select([self.fd], [], [])
                with self.lock:
                    try:
                        if len(self.data) >= self.cap and hasattr(os, "splice"):
                            if not self._discard():
                                break
                            continue
                        chunk = os.read(self.fd, 1 << 16)
                    except BlockingIOError:
                        continue  # text() took it first
                    if not chunk:
                        break
                    self._take(chunk)
        except OSError:
            pass
        finally:
            with self.lock:
                for fd in (self.fd, self._null):
                    try:
                        os.close(fd)
                    except OSError:
                        pass
                self.fd = self._null = -1

    def sync(self) -> None:
        with self.lock:
            while self.fd >= 0:
                waiting = struct.unpack("i", fcntl.ioctl(self.fd, termios.FIONREAD, b"\0" * 4))[0]
                if waiting <= 0:
                    return
                try:
                    self._take(os.read(self.fd, waiting))
                except BlockingIOError:
                    return

    def text(self) -> str:
        if self.is_alive():
            self.sync()
        suffix = (f"\n[output cut: the first {self.cap:,} bytes are shown, {self.dropped:,} more were "
                  f"dropped]") if self.dropped else ""
        return self.data.decode("utf-8", "replace") + suffix


# How a child's exit reads when the kernel killed it for its memory limit (forkserver's cgroup
# says so); the session tells a memory failure from a timeout by this prefix alone. A bare
# SIGKILL ("time or memory limit") may be the grader's own, at the time limit.
MEMORY_KILLED = "killed: memory limit"
GRADER_STOPPED = "stopped by the grader at its time limit"


def describe_status(status: int | None) -> str:
    if status is None:
        return "still running"
    if status < 0:
        sig = -status
        if sig == signal.SIGKILL:
            return "killed (SIGKILL: time or memory limit)"
        if sig == signal.SIGXCPU:
            return "CPU time limit exceeded"
        if sig == signal.SIGSEGV:
            return "segmentation fault"
        try:
            return f"killed by signal {signal.Signals(sig).name}"
        except ValueError:
            return f"killed by signal {sig}"
    return f"exit status {status}"


class SandboxChild:
    """What every sandboxed child shares, and the protocol ``SandboxSession`` reads from it.

    A child has a request and a response pipe (``request_fd``, ``response_fd``) and captures of
    its stdout and stderr (``out``, ``err``: ``_capture``); ``stdout_text``/``stderr_text`` read
    them, ``_close`` closes pipes by name and ``_join_output`` lets the captures finish. Each kind
    says how it starts, waits and dies (``wait_exit``, ``describe_exit``, ``kill``), and may
    override the optional parts declared here with their defaults: ``polite_exit`` (ask it to
    exit before killing it), ``cgroup`` (None: no cgroup to meter) and ``wait_gone``.
    """

    polite_exit = True
    cgroup = None
    request_fd = response_fd = -1

    def _capture(self, out_fd: int, err_fd: int, limits: Limits) -> None:
        self.out = OutputCapture(out_fd, limits.output_bytes)
        self.err = OutputCapture(err_fd, limits.output_bytes)
        self.out.start()
        self.err.start()

    def _close(self, *names: str) -> None:
        """Close the pipes held in these attributes, each once (-1 afterwards)."""
        for name in names:
            fd = getattr(self, name)
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
                setattr(self, name, -1)

    def _join_output(self, timeout: float = 1.0) -> None:
        self.out.join(timeout)
        self.err.join(timeout)

    def path_of(self, host_path: str) -> str:
        """Where the child sees a file of the submission's directory."""
        return host_path

    def stdout_text(self) -> str:
        return self.out.text()

    def stderr_text(self) -> str:
        return self.err.text()


class PlainChild(SandboxChild):
    """A fresh interpreter running the harness, in its own session, under rlimits."""

    def __init__(self, limits: Limits, device: str, apply_rlimits: bool):
        req_r, req_w = os.pipe()
        res_r, res_w = os.pipe()
        # No preexec_fn (unsafe in a threaded grader): the harness applies the rlimits itself,
        # first thing, and learns its pipe numbers from argv. -B: the child imports from the
        # installed package, and must never write bytecode there for later children to load
        # (-I ignores PYTHONDONTWRITEBYTECODE).
        argv = [sys.executable, "-I", "-B", HARNESS, str(req_r), str(res_w)]
        if apply_rlimits:
            # No cgroup here: RLIMIT_DATA stays even for CUDA, the only memory bound there is.
            argv.append(json.dumps(policy.rlimits(limits, device)))
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            pass_fds=(req_r, res_w), start_new_session=True, env=policy.child_env(device), cwd="/tmp")
        os.close(req_r)
        os.close(res_w)
        self.request_fd, self.response_fd = req_w, res_r
        self.stopped = False  # killed by the grader (its time ran out), not by the kernel
        self._capture(os.dup(self.proc.stdout.fileno()), os.dup(self.proc.stderr.fileno()), limits)
        self.proc.stdout.close()
        self.proc.stderr.close()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_exit(self, timeout: float) -> str:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        return describe_status(self.proc.poll())

    def describe_exit(self) -> str:
        status = self.proc.poll()
        return GRADER_STOPPED if self.stopped else describe_status(status)

    def kill(self) -> None:
        self.stopped = self.stopped or self.proc.poll() is None  # the grader's SIGKILL, not the kernel's
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        self._close("request_fd", "response_fd")
        self._join_output()


class PlainBackend:
    level = "none"

    def __init__(self, limits: Limits, device: str, apply_rlimits: bool, warnings=()):
        self.limits, self.device, self.apply_rlimits = limits, device, apply_rlimits
        self.warnings = list(warnings)
        if apply_rlimits:
            self.level = "auto"

    def spawn(self, submission_dir: str) -> PlainChild:
        return PlainChild(self.limits, self.device, self.apply_rlimits)


def select_backend(level: str, limits: Limits, device: str):
    """The backend for ``level``; ``strict`` raises :class:`SandboxUnavailable` naming what is missing."""
    if level not in ("strict", "auto", "none", "local"):
        raise ValueError(f"unknown sandbox level {level!r} (choose strict, auto, none or local)")
    if level == "local":
        from .local import LocalBackend
        return LocalBackend(limits, device)
    if level == "none":
        return PlainBackend(limits, device, apply_rlimits=False,
                            warnings=[T("sandbox disabled (--sandbox none): the submission runs unconfined")])
    from .wall import strict_problems
    problems = strict_problems(wall=True)
    if level == "strict":
        if problems:
            raise SandboxUnavailable("strict isolation is not available on this host; missing: "
                                     + "; ".join(problems))
        from .pool import ZygoteBackend
        return ZygoteBackend(limits, device, wall=True, level="strict")
    if not problems:
        from .pool import ZygoteBackend
        try:
            return ZygoteBackend(limits, device, wall=True, level="strict")
        except SandboxUnavailable as exc:
            problems = [str(exc)]
    elif strict_problems(wall=False) == []:  # everything but the outer wall
        from .pool import ZygoteBackend
        try:
            return ZygoteBackend(limits, device, wall=False, level="auto", warnings=[
                T("the outer bubblewrap wall is unavailable ({problems}); the submission runs in namespaces, "
                  "a cgroup and seccomp without it", problems="; ".join(problems))])
        except SandboxUnavailable as exc:
            problems = [str(exc)]
    return PlainBackend(limits, device, apply_rlimits=True, warnings=[
        T("full isolation is unavailable here (missing: {problems}); the submission runs in a plain "
          "subprocess with resource limits only: fine for checking your own code, not for grading "
          "untrusted code", problems="; ".join(problems))])


STRICT_LAYERS = "bubblewrap wall, namespaces, cgroup, seccomp, a uid per run"


def isolation_summary(level: str) -> str:
    """One line for a service's start-up: the isolation ``select_backend(level)`` gives on this
    host, and why (what is missing). It asks the host what ``select_backend`` asks it, without
    starting a sandbox."""
    from .wall import strict_problems
    if level == "none":
        return "sandbox: none → a plain subprocess, no isolation (ATTN_GRADER_SANDBOX=none)"
    if level == "local":
        return "sandbox: local → forked from the grading process, no isolation (a student's own pre-check only)"
    problems = strict_problems(wall=True)
    if not problems:
        return f"sandbox: strict ({STRICT_LAYERS})" if level == "strict" else \
            f"sandbox: auto → strict ({STRICT_LAYERS})"
    missing = "; ".join(problems)
    if level == "strict":
        return f"sandbox: strict is unavailable here, missing: {missing}"
    if strict_problems(wall=False) == []:
        return ("sandbox: auto → namespaces, cgroup, seccomp and a uid per run, without the bubblewrap "
                f"wall; missing: {missing}")
    return ("sandbox: auto → a plain subprocess with resource limits only, not for untrusted students; "
            f"missing: {missing}")
