"""A conversation with one sandboxed student process.

The trusted parent owns the inputs and the comparison; the child only runs the
student's function. ``SandboxSession`` hides how the child was made (see ``backends``): the
checks ask it to ``call`` the function and get plain tensors back, and a child
that dies is replaced, so one crash costs one check, not the whole grade.
"""
from __future__ import annotations

import os
import select
import shutil
import tempfile
import time
from dataclasses import dataclass, field

import torch

from . import answers, policy, wire
from .backends import MEMORY_KILLED
from .limits import Limits
from .waiting import WaitClock

TEARDOWN_SECONDS = 15.0  # at most, at the session's end, for its killed runs to be gone
PROTOCOL_MESSAGE = ("your program wrote to the grader's answer channel (or tampered with the grader's "
                    "side of the sandbox): {detail}. Only the function's return value is graded")


@dataclass
class StudentError:
    """Something the student's code did: an exception, a crash, a timeout."""
    kind: str          # exception | crash | timeout | memory | protocol | missing | import
    message: str
    traceback: str = ""
    exc_type: str = ""


@dataclass
class CallResult:
    ok: bool
    output: torch.Tensor | tuple | None = None   # a tuple of tensors only when the call asked for it
    output_type: str = ""
    output_device: str = ""
    requires_grad: bool = False
    grads: list | None = None
    grad_error: object = None
    ops: list = field(default_factory=list)
    error: StudentError | None = None
    elapsed: float = 0.0            # as the child measured it: advisory
    wall: float = 0.0               # request sent to answer read, measured here
    cpu: float | None = None        # CPU time the child's threads used for the request (kernel's count, read here)
    inputs_after: list | None = None
    blocked: list = field(default_factory=list)
    memory_peak: int | None = None  # bytes the run's cgroup grew by (parent-measured; fresh_call only)


class MemoryMeter:
    """How much memory a fresh child took, from its cgroup, read here in the parent.

    Made before the file is imported (``fresh_call``): the peak is reset then, and ``peak()`` is
    the growth above the usage at that moment. Where the kernel cannot reset it (cgroup v2
    before Linux 6.12) the child's peak since it started stands in: an upper bound, never an
    underestimate.
    """

    def __init__(self, cgroup):
        self.cgroup = cgroup
        self.base = cgroup.memory_usage() if cgroup is not None else None
        self.reset = cgroup.reset_memory_peak() if self.base is not None else False

    def peak(self) -> int | None:
        if self.base is None:
            return None
        now = self.cgroup.memory_peak()
        if now is None:
            return None
        return max(0, now - self.base)


@dataclass
class LoadResult:
    ok: bool
    params: list | None = None
    error: StudentError | None = None
    blocked: list = field(default_factory=list)


class SandboxSession:
    """Load ``source`` in a sandboxed child and call ``function`` in it.

    Use as a context manager. ``level`` is ``strict``, ``auto`` or ``none``;
    see :mod:`grader.sandbox.backends` for what each level provides.
    """

    def __init__(self, source: str | bytes, function: str, *, level: str = "auto",
                 limits: Limits | None = None, device: str = "cpu", filename: str = "submission.py",
                 block: tuple = ()):
        from .backends import select_backend  # late: backends import this module's types
        self.source, self.function, self.device = source, function, device
        self.block = tuple(block)  # more of torch switched off in the child (e.g. "autograd")
        self.limits = limits or Limits()
        self.backend = select_backend(level, self.limits, device)
        self.level = self.backend.level
        self.warnings: list[str] = list(self.backend.warnings)
        # Only the grader's own user reads it: the plain child runs as that user, and the strict
        # sandbox is handed the file's descriptor, so no other local account ever needs access.
        self._dir = tempfile.mkdtemp(prefix="attn-sub-")  # 0700
        self.path = os.path.join(self._dir, filename)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with open(fd, "wb") as f:  # bytes pass through untouched: a non-UTF-8 file fails to import
            f.write(source if isinstance(source, bytes) else source.encode("utf-8", "surrogateescape"))
        self.child = None
        self._retired: list = []  # children killed in this session (``close`` waits until they are gone)
        self._output = ["", ""]
        self.started_at = time.monotonic()
        self.charged = 0.0  # the child's time so far: its requests' wall time less its waits for a core
        self.last_cpu: float | None = None  # CPU seconds of the last request (WaitClock.cpu)
        self.restarts = 0
        self.last_load: LoadResult | None = None
        self.protocol_violations: list[str] = []

    # -- lifecycle -------------------------------------------------------------------
    def __enter__(self) -> "SandboxSession":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.child is not None and getattr(self.child, "polite_exit", True):
            try:  # a polite exit lets the student's buffered prints reach us
                wire.write_message(self.child.request_fd, {"op": "exit"})
                self.child.wait_exit(0.5)
            except OSError:
                pass
        if self.child is not None:
            self._retire_child()
        # Nothing of the run outlives the session, whatever the load: a killed process still
        # needs the CPU to exit, and on a loaded host a fork bomb's took seconds to go.
        deadline = time.monotonic() + TEARDOWN_SECONDS
        for child in self._retired:
            wait_gone = getattr(child, "wait_gone", None)  # runs in a cgroup (the janitor's)
            if wait_gone is not None:
                wait_gone(max(0.0, deadline - time.monotonic()))
        self._retired = []
        shutil.rmtree(self._dir, ignore_errors=True)
        closed = getattr(self.backend, "session_closed", None)  # only pools of warm children care
        if closed is not None:
            closed()

    def _retire_child(self) -> None:
        """Kill the child (and all it started) and keep what it printed."""
        self.child.kill()
        self._output[0] += self.child.stdout_text()
        self._output[1] += self.child.stderr_text()
        self._retired.append(self.child)
        self.child = None

    @property
    def stdout(self) -> str:
        return self._output[0] + (self.child.stdout_text() if self.child else "")

    @property
    def stderr(self) -> str:
        return self._output[1] + (self.child.stderr_text() if self.child else "")

    def _limit(self, timeout: float | None) -> float:
        """Seconds of the child's own time one request may take (see ``waiting.py``)."""
        per_call = self.limits.call_seconds if timeout is None else timeout
        return max(0.05, min(per_call, self.limits.wall_seconds - self.charged))

    def _out_of_time(self) -> StudentError | None:
        """Past the session's total time nothing more runs (no child is even started): the child's
        own time, or, on a host loaded past reason, ``LOAD_STRETCH`` times it in wall time."""
        wall = time.monotonic() - self.started_at
        if self.charged < self.limits.wall_seconds and wall < self.limits.wall_seconds * policy.LOAD_STRETCH:
            return None
        if self.child is not None:
            self._retire_child()
        return StudentError("timeout", f"the submission used up its total time limit "
                                       f"({self.limits.wall_seconds:g} s of wall-clock time for all calls)")

    def _violation(self, detail: str) -> StudentError:
        """A forged or malformed answer: the child's state is unknown, so it is replaced."""
        self.protocol_violations.append(detail[:300])
        if self.child is not None:
            self._retire_child()
        return StudentError("protocol", PROTOCOL_MESSAGE.format(detail=detail[:300]))

    def _exchange(self, request: dict, limit: float, max_bytes: int = wire.MAX_BYTES) -> dict | StudentError:
        """Send one request and read one answer within ``limit`` seconds of the child's own time;
        a dead or silent child becomes a StudentError."""
        clock = WaitClock(self.child)
        cgroup = getattr(self.child, "cgroup", None)
        hits = cgroup.memory_limit_hits() if cgroup is not None else None
        self.last_cpu = None
        try:
            answer = self._answer(request, limit, max_bytes, clock)
            self.last_cpu = clock.cpu()
            return answer
        except wire.WireTimeout:
            # A run pressed against its memory limit pages its own code in and out until the
            # kernel kills it, slower on a busy host: whether its time or its memory ran out first
            # depended on the load. Hitting the limit during the request is running out of memory.
            thrashed = hits is not None and (cgroup.memory_limit_hits() or 0) > hits
            self.child.kill()
            status = self.child.describe_exit()
            self._retire_child()
            if status.startswith(MEMORY_KILLED):  # the kernel's kill, its time ran out after
                return StudentError("memory", f"no answer: {status}")
            if thrashed:
                return StudentError("memory", f"the submission kept hitting its memory limit "
                                              f"({self.limits.memory_bytes / 2**30:.1f} GiB) until its time ran out")
            return StudentError("timeout", f"no answer within the time limit ({status})")
        except (wire.WireError, OSError, BrokenPipeError) as exc:
            status = self.child.wait_exit(1.0)
            self._retire_child()
            kind = "memory" if "memory" in status else "crash"
            if "closed" in str(exc) or isinstance(exc, (OSError, BrokenPipeError)):
                return StudentError(kind, f"the submission's process ended unexpectedly ({status})")
            self.protocol_violations.append(str(exc)[:300])
            return StudentError("protocol", PROTOCOL_MESSAGE.format(detail=f"a malformed frame ({exc})"))
        finally:
            self.charged += max(0.0, time.monotonic() - clock.began - clock.most)

    def _answer(self, request: dict, limit: float, max_bytes: int, clock: WaitClock) -> dict:
        started = clock.began
        # Writing needs only a reading child (it waits for the request): no stretch for that.
        wire.write_message(self.child.request_fd, request, deadline=started + limit)
        deadline, backstop = started + limit, started + limit * policy.LOAD_STRETCH
        while not select.select([self.child.response_fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
            deadline = min(started + limit + clock.waited(), backstop)  # waits for a core don't count
            if time.monotonic() >= deadline:
                raise wire.WireTimeout("no answer within the limit")
        # The answer has begun: a child that stops halfway through it is not waited for long.
        answer = wire.read_message(self.child.response_fd, deadline=max(deadline, time.monotonic() + 1.0),
                                   max_bytes=max_bytes)
        clock.waited()  # what the child waited for a core is not charged to it
        return answer

    # -- the two requests ------------------------------------------------------------
    def load(self, lean_allocator: bool = False) -> LoadResult:
        """Start a child (if none) and import the file in it (``lean_allocator``: see ``fresh_call``)."""
        spent = self._out_of_time()
        if spent:
            self.last_load = LoadResult(False, error=spent)
            return self.last_load
        if self.child is None:
            self.child = self.backend.spawn(self._dir)
            self.restarts += self.last_load is not None
        request = {"op": "load", "path": self.child.path_of(self.path), "function": self.function}
        if self.block:
            request["block"] = list(self.block)
        if lean_allocator:
            request["lean_allocator"] = True
        answer = self._exchange(request, self._limit(self.limits.load_seconds))
        if not isinstance(answer, StudentError):
            try:
                answer = answers.check_load(answer)
            except answers.ProtocolViolation as exc:
                answer = self._violation(str(exc))
        if isinstance(answer, StudentError):
            answer.kind = "import" if answer.kind == "crash" else answer.kind
            self.last_load = LoadResult(False, error=answer)
        elif not answer["ok"]:
            err = answer["error"]
            msg = err["message"]
            if err.get("defined"):
                msg += f" (the file defines: {', '.join(err['defined'])})"
            self.last_load = LoadResult(False, error=StudentError(
                "missing" if answer["stage"] == "missing" else "import", msg, err["traceback"], err["type"]),
                blocked=answer["blocked"])
        else:
            self.last_load = LoadResult(True, params=answer["params"], blocked=answer["blocked"])
        return self.last_load

    def fresh_call(self, *args, timeout: float | None = None, run_on: str | None = None, **kwargs) -> CallResult:
        """One call in a child of its own, its memory measured from before the file is imported.

        The child is new (spawned for this call, retired after it), so its ``memory_peak`` covers
        the import and the call: memory a file takes at import (a buffer it later fills with
        ``out=``) counts, and nothing an earlier check left in the allocator can be reused
        unseen. The child's allocator hands every block of 256 KiB or more back to the kernel when
        it is freed (``lean_allocator``): what the cgroup then sees is what the code holds, not
        what glibc kept for later. The call runs without the advisory recorders. The session's own
        child is kept for the other checks."""
        kept, last_load, self.child = self.child, self.last_load, None
        try:
            spent = self._out_of_time()
            if spent:
                return CallResult(False, error=spent)
            self.child = self.backend.spawn(self._dir)
            meter = MemoryMeter(getattr(self.child, "cgroup", None))
            loaded = self.load(lean_allocator=True)
            if not loaded.ok:
                return CallResult(False, error=loaded.error)
            result = self.call(*args, timeout=timeout, run_on=run_on, **kwargs)
            result.memory_peak = meter.peak()
            return result
        finally:
            if self.child is not None:
                self._retire_child()
            self.child, self.last_load = kept, last_load

    def call(self, *args, grad_output: torch.Tensor | None = None, wrt: tuple = (),
             trace: bool = False, timeout: float | None = None, echo: bool = False, outputs: int = 1,
             run_on: str | None = None, **kwargs) -> CallResult:
        """Run the student's function on ``args``/``kwargs`` (and backward, when ``wrt`` is given).

        ``wrt`` lists the positional argument indices to differentiate with respect to;
        ``echo`` asks for the inputs back as they are after the call (``inputs_after``);
        ``outputs`` > 1 lets a tuple of tensors come back (``output`` is then a tuple);
        ``run_on`` runs this call on another device than the session's (e.g. "cpu" on a GPU
        worker, where the cgroup sees host memory only). Memory is measured by ``fresh_call``.
        """
        spent = self._out_of_time()
        if spent:
            return CallResult(False, error=spent)
        if self.child is None:
            loaded = self.load()
            if not loaded.ok:
                return CallResult(False, error=loaded.error)
        args, wrt = list(args), list(wrt)
        request = {"op": "call", "args": args, "kwargs": kwargs, "device": run_on or self.device,
                   "wrt": wrt, "grad_output": grad_output, "trace": trace, "echo": echo}
        if outputs > 1:  # only then: a one-output task's request is exactly what it always was
            request["outputs"] = outputs
        started = time.perf_counter()
        answer = self._exchange(request, self._limit(timeout), answers.byte_budget(args, kwargs))
        wall = time.perf_counter() - started
        if not isinstance(answer, StudentError):
            try:
                answer = answers.check_call(answer, args, kwargs, wrt, echo, outputs)
            except answers.ProtocolViolation as exc:
                answer = self._violation(str(exc))
        if isinstance(answer, StudentError):
            return CallResult(False, error=answer, wall=wall)
        if not answer["ok"]:
            err = answer["error"]
            return CallResult(False, error=StudentError("exception", err["message"] or "unknown error",
                                                        err["traceback"], err["type"]),
                              blocked=answer["blocked"], wall=wall)
        return CallResult(
            True, output=answer["output"], output_type=answer["output_type"],
            output_device=answer["output_device"], requires_grad=answer["requires_grad"],
            grads=answer["grads"], grad_error=answer["grad_error"], ops=answer["ops"],
            elapsed=answer["elapsed"], wall=wall, cpu=self.last_cpu, inputs_after=answer["inputs_after"],
            blocked=answer["blocked"])
