"""What every check shares: its result, its failures, and the context it calls the submission through.

A check is a function ``fn(ctx) -> str | (str, details) | None``: returning normally means it
passed (the string is its message), raising :class:`Fail` means the
submission is wrong in the way the message says, and :class:`StudentFailure` is
raised for it when the student's code itself crashed, hung or raised.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Callable

import torch

from .. import bounded
from ..i18n import T
from .input_space import describe
from .inputs import InputFactory


class Fail(Exception):
    """The submission failed the check; ``message`` is for the student."""

    def __init__(self, message: str, details: dict | None = None):
        super().__init__(message)
        self.message, self.details = message, details or {}


def with_cause(message, cause) -> T:
    """``message`` and then its likely cause, as a sentence of its own. The one place that puts
    the stop between them: a message without one ran into its cause ("...keys 0..i Likely
    cause: ...", review 3: P17), and one with a stop must not get a second."""
    if str(message).rstrip().endswith((".", "?", "!")):
        return T("{message} Likely cause: {cause}.", message=message, cause=cause)
    return T("{message}. Likely cause: {value}.", message=message, value=cause)


class StudentFailure(Exception):
    """The student's function raised, crashed or timed out."""

    def __init__(self, error, during: str = ""):
        super().__init__(error.message)
        self.error, self.during = error, during

    @property
    def unanswered(self) -> bool:
        """The child gave no answer (it crashed, hung, ran out of memory or forged one), as
        opposed to the function raising an exception."""
        return self.error.kind in ("crash", "timeout", "memory", "protocol")

    @property
    def out_of_memory(self) -> bool:
        """The child ran out of memory, or the function raised for an allocation its limit refused
        (torch's allocator raises a RuntimeError naming the errno's text, Python a MemoryError)."""
        e = self.error
        return e.kind == "memory" or (e.kind == "exception" and (
            e.exc_type == "MemoryError" or "can't allocate memory" in (e.message or "").lower()
            or "cannot allocate memory" in (e.message or "").lower()))

    def describe(self) -> str:
        e = self.error
        during = T(" ({during})", during=self.during) if self.during else ""
        if e.kind == "exception":
            where = last_student_line(e.traceback)
            return T("your function raised {exc_type}{during}: {message}{at}",
                     exc_type=e.exc_type or T("an exception"), during=during, message=e.message,
                     at=T(" (at {where})", where=where) if where else "")
        if e.kind == "timeout":
            return T("your function did not finish in time{during}: an endless loop, or far slower than "
                     "it needs to be ({message})", during=during, message=e.message)
        if e.kind == "memory":
            return T("your function ran out of memory ({message})", message=e.message)
        return T("your function's process failed: {message}", message=e.message)


def last_student_line(traceback: str) -> str:
    """'submission.py line 12: scores = q @ k.T' from the student's own traceback frames."""
    lines = traceback.splitlines()
    found = ""
    for i, line in enumerate(lines):
        m = re.match(r'\s*File "(.*?)", line (\d+)', line)
        if m:
            code = lines[i + 1].strip() if i + 1 < len(lines) and not lines[i + 1].strip().startswith("File ") else ""
            found = f"{os.path.basename(m.group(1))} line {m.group(2)}" + (f": {code}" if code else "")
    return found


def clean_traceback(traceback: str) -> str:
    """The student's traceback with the sandbox's temporary directory taken out of the paths."""
    return re.sub(r'File "[^"]*/([^"/]+)"', r'File "\1"', traceback)


@dataclass
class Check:
    id: str
    fn: Callable
    weight: int = 1
    post: bool = False   # runs after every other check, whatever happened before (crashes included)
    needs: tuple = ()    # checks whose verdict this one reads (ctx.passed_check): they run first
    gates: tuple = ()    # families whose points rest on this check: unless it passes, they score nothing
    seconds: float | None = None  # its own budget of the student's time, where the default is too small

    @property
    def family(self) -> str:
        return self.id.split(".")[0]


class Context:
    """The submission as the checks see it: a callable with fresh inputs and a trace."""

    def __init__(self, session, task, seed: int, device: str, check_seconds: float, smallest: bool = False,
                 observe=None, analysis=None):
        self.session, self.task, self.device = session, task, device
        self.analysis = analysis            # the grading's parse and source scans (bounded.analyse)
        self.observe = observe              # observe(check_id, args, kwargs) before each call (tasks validate)
        self.inputs = InputFactory(seed, smallest=smallest)
        self.ops: set[str] = set()          # every torch function / aten op seen while tracing
        self.mutated: dict[str, str] = {}   # input name -> check id that saw it modified
        self.passed: set[str] = set()
        self.current = ""
        self.check_seconds = self.default_seconds = check_seconds
        self.check_began = 0.0              # the session's charged time when this check started
        self.calls = 0
        self.tensor_calls = 0               # calls that returned a tensor of the expected shape
        self.blocked: set[str] = set()      # built-in attention the child says it tried (advisory)
        self.samples: list[tuple] = []      # (args, kwargs, output) of plain calls, for forbidden.runtime
        self._sampled: dict = {}            # input dtype -> samples kept
        self.fingerprint_samples: list[tuple] = []  # taken first, for the same check
        self.fingerprint_unanswered = False  # a call on them hung or died (forbidden.runtime)
        # Some call matched the reference (or the reference with a named bug), or its weights are
        # softmax(c · q·k): the function computes attention, so its properties may earn points.
        self.attention_seen = False
        self.diagnoses: list[str] = []      # bugs named so far, in order (see grader/causes.py)
        # (check id, {axis: edges} of its inputs, None or (exception type, message)) per call
        self.drawn: list[tuple] = []
        self.answers: list[tuple] = []      # (check id, args, kwargs, output) of small plain calls (diagnosis.py)

    def scanned(self, kind: str) -> list[dict]:
        """The findings of the source scan ``kind`` (``bounded.scan``): from the grading's analysis,
        which ran it with the parse, or else in a limited process of its own."""
        if self.analysis is not None and kind in self.analysis.scans:
            return self.analysis.findings(kind)
        return bounded.scan(self.session.source, kind)

    def passed_check(self, check_id: str) -> bool:
        """Did ``check_id`` pass? Only for a check that declares it in ``needs`` (so it ran before)."""
        current = next((c for c in self.task.checks if c.id == self.current), None)
        if current is None or check_id not in current.needs:
            raise RuntimeError(f"check {self.current!r} reads the verdict of {check_id!r} without declaring it "
                               f"in Check(needs=...)")
        return check_id in self.passed

    def start(self, check_id: str) -> None:
        self.current = check_id
        check = next((c for c in self.task.checks if c.id == check_id), None)
        self.check_seconds = getattr(check, "seconds", None) or self.default_seconds
        # The budget counts the student's calls only, as the session charges them (without the
        # waits for a core and the grader's own work): the same on an idle and a loaded host.
        self.check_began = self.session.charged

    def call(self, *args, grad_output=None, wrt=(), during: str = "",
             run_on: str | None = None, trace: bool = True, seconds: float | None = None,
             fresh_child: bool = False, **kwargs):
        """Run the student function; raises StudentFailure if it raised, crashed or timed out.

        ``trace=False`` runs it without the advisory operation recorders, which cost a loop of
        small torch calls 4-5x its own time: for the long calls whose time is what they test.
        ``seconds`` is a budget of the call's own (of the child's own time; within the check's).
        ``fresh_child`` runs it in a child of its own, whose ``memory_peak`` covers the file's import
        and the call (``SandboxSession.fresh_call``; always without the recorders)."""
        if self.observe is not None:
            self.observe(self.current, args, kwargs)
        left = self.check_seconds - (self.session.charged - self.check_began)
        if left <= 0:
            raise Fail(T("this check ran out of its time budget ({seconds:.0f} s): your function is too slow "
                         "on these small inputs", seconds=self.check_seconds))
        # A check with a budget of its own (Check.seconds) may spend it on one call.
        per_call = self.check_seconds if self.check_seconds > self.default_seconds else self.session.limits.call_seconds
        limit = min(left, per_call, seconds or float("inf"))
        sent = [(f"arg{i}", a) for i, a in enumerate(args) if isinstance(a, torch.Tensor)] + \
               [(k, v) for k, v in kwargs.items() if isinstance(v, torch.Tensor)]
        echo = sum(t.numel() for _, t in sent) <= ECHO_LIMIT
        drawn = describe(self, args, kwargs)
        if fresh_child:
            result = self.session.fresh_call(*args, timeout=limit, run_on=run_on, echo=echo,
                                             outputs=self.task.outputs, **kwargs)
        else:
            result = self.session.call(*args, grad_output=grad_output, wrt=wrt, trace=trace,
                                       timeout=limit, echo=echo, outputs=self.task.outputs,
                                       run_on=run_on, **kwargs)
        self.calls += 1
        self.ops.update(result.ops)
        self.blocked.update(result.blocked)
        if result.inputs_after is not None:  # compared here: the child's own comparison is not evidence
            for (name, before), after in zip(sent, result.inputs_after):
                if before.dtype != after.dtype or not _same(before, after.to(before.device)):
                    self.mutated.setdefault(name, self.current)
        self.drawn.append((self.current, drawn, None if result.ok else (result.error.exc_type or result.error.kind,
                                                                          result.error.message)))
        if not result.ok:
            raise StudentFailure(result.error, during)
        if echo and not wrt and not fresh_child:
            self.answers.append((self.current, args, kwargs, result.output))
        if not fresh_child:  # the memory cases' sizes would cost the fingerprint seconds in the parent
            self._keep_sample(args, kwargs, result.output, sent, wrt)
        return result

    def _keep_sample(self, args, kwargs, output, sent, wrt) -> None:
        """The first ``SAMPLES_PER_DTYPE`` calls of each input dtype, for the fingerprint
        (``forbidden.runtime``): a tensor or a tuple of tensors, on plain (not autograd) calls."""
        dtype = sent[0][1].dtype if sent else None
        outs = output if isinstance(output, tuple) else (output,)
        if wrt or dtype is None or not dtype.is_floating_point or \
                not all(isinstance(t, torch.Tensor) and t.is_floating_point() for t in outs):
            return
        if self._sampled.get(dtype, 0) < SAMPLES_PER_DTYPE:
            self._sampled[dtype] = self._sampled.get(dtype, 0) + 1
            self.samples.append((args, kwargs, output))

    def tensor_out(self, result, shape: tuple, what: str = "") -> torch.Tensor:
        """The call's output, or a Fail naming what came back instead of a tensor of ``shape``."""
        if result.output is None:
            kind = {"builtins.NoneType": "None", "builtins.ellipsis": "... (Ellipsis)"}.get(
                result.output_type, result.output_type or "nothing")
            hint = {"None": T(" (did you forget a return statement?)"),
                    "builtins.tuple": T(": return only the output tensor, not (output, weights)"),
                    "numpy.ndarray": T(": stay in torch so that gradients flow")}.get(kind, "")
            raise Fail(T("your function returned {kind} instead of a torch.Tensor{hint}", kind=kind, hint=hint),
                       {"output_type": kind})
        out = result.output
        if tuple(out.shape) != tuple(shape):
            raise Fail(T("your output has shape {got} but {want} was expected{what}", got=tuple(out.shape),
                         want=tuple(shape), what=T(" for {what}", what=what) if what else ""),
                       {"output_shape": list(out.shape), "expected_shape": list(shape)})
        if not out.is_floating_point():
            raise Fail(T("your output has dtype {dtype}, expected a floating-point tensor", dtype=out.dtype))
        self.tensor_calls += 1
        return out

    def tuple_out(self, result, shapes: list, names: tuple, what: str = "") -> tuple:
        """The call's tuple of outputs (one per name, of ``shapes``), or a Fail naming what is wrong."""
        got = result.output
        want = len(shapes)
        if not isinstance(got, tuple):
            if isinstance(got, torch.Tensor):
                raise Fail(T("your function returned one tensor; return the tuple ({names})",
                             names=", ".join(names)), {"output_type": result.output_type})
            kind = {"builtins.NoneType": "None"}.get(result.output_type, result.output_type or "nothing")
            hint = T(" (did you forget a return statement?)") if kind == "None" else ""
            raise Fail(T("your function returned {kind} instead of a tuple of {want} tensors ({names}){hint}",
                         kind=kind, want=want, names=", ".join(names), hint=hint), {"output_type": kind})
        if len(got) != want:
            raise Fail(T("your function returned {got} tensors; return exactly {want}: ({names})",
                         got=len(got), want=want, names=", ".join(names)), {"output_count": len(got)})
        for name, out, shape in zip(names, got, shapes):
            if tuple(out.shape) != tuple(shape):
                raise Fail(T("your {name} has shape {got} but {want} was expected{what}", name=name,
                             got=tuple(out.shape), want=tuple(shape),
                             what=T(" for {what}", what=what) if what else ""),
                           {"output": name, "output_shape": list(out.shape), "expected_shape": list(shape)})
            if not out.is_floating_point():
                raise Fail(T("your {name} has dtype {dtype}, expected a floating-point tensor",
                             name=name, dtype=out.dtype))
        self.tensor_calls += 1
        return got


ECHO_LIMIT = 1 << 18  # inputs of up to this many elements come back for the in-place check
SAMPLES_PER_DTYPE = 8  # calls of each input dtype the fingerprint compares (forbidden.runtime)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-for-bit equal, NaN included (an input with NaN is unchanged if it still has them)."""
    if a.is_floating_point():
        return bool(((a == b) | (a.isnan() & b.isnan())).all())
    return bool(torch.equal(a, b))


def broadcast_shapes(*shapes) -> tuple:
    """torch.broadcast_shapes without its first-call import of sympy (0.4 s in a fresh process)."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        sizes = {s[i - ndim + len(s)] for s in shapes if i - ndim + len(s) >= 0} - {1}
        if len(sizes) > 1:
            raise ValueError(f"shapes {[tuple(s) for s in shapes]} do not broadcast")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def shape_str(*tensors) -> str:
    return ", ".join("x".join(map(str, t.shape)) if t is not None else "None" for t in tensors)


def heatmap(weights: torch.Tensor) -> list:
    """A small (≤ 16 × 16) weight matrix as nested lists rounded to 4 decimals for the web page."""
    w = weights.detach().double()
    while w.dim() > 2:
        w = w[0]
    w = w[:16, :16]
    return [[round(float(x), 4) if x == x else None for x in row] for row in w]
