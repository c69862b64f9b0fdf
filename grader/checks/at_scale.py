"""``grad.at_scale``: the gradients at a size where numerical differentiation cannot keep up.

Central finite differences of the student's own forward give the same gradients as a backward pass,
to every digit a check can compare (issue 26: a hand-written backward replaced by them; issue 30: an
``sdpa`` forward in NumPy whose child replaced ``torch.autograd.grad`` by them). Values cannot tell
them apart; cost can. Differences need two forward passes per input element, a backward about two
forwards in all, so on inputs with many elements and a cheap forward (B·H = 8, L = S = 24,
E = Ev = 512: 294,912 elements) a backward takes milliseconds and differences take minutes, however
slow or fast the student's code is. The lengths are short on purpose: the course's own NumPy
softmax backward builds each row's S × S Jacobian in a Python loop, and at L = S = 256 that honest
code would need minutes too; here it needs under a second.

The call runs without the advisory recorders (``trace=False``), which would cost a row-by-row loop
several times its own time. The budget is the child's own time, measured by the parent (``session.charged``: waits for a busy
core are not charged, so the verdict is the same on an idle and a loaded host). The gradients that
were right on small inputs must be right here too (a file cannot answer fast with anything at this
size). The check gates the families its task names (``Check.gates``): without it, those points
would be open to gradients no backward produced. What a student can still do is in SECURITY.md.
"""
from __future__ import annotations

import torch

from .backward import NAMES, OUTPUT_CHECKS
from .backward_bugs import closed_form
from .base import Fail, StudentFailure
from .gradients import SDPA_NAMES
from .tolerance import GRAD_FLOOR_FACTOR, GRAD_MULTIPLIER, allowance, compare
from ..i18n import T

BATCH, HEADS, LENGTH, WIDTH = 2, 4, 24, 512
SECONDS = 4.0   # the child's own time for one call; a backward by hand takes milliseconds to a second


def _size():
    return dict(bh=BATCH * HEADS, n=LENGTH, e=WIDTH, budget=SECONDS,
                passes=2 * 3 * BATCH * HEADS * LENGTH * WIDTH)


def _inputs(ctx, three_d: bool):
    shape = (BATCH * HEADS,) if three_d else (BATCH, HEADS)
    return [ctx.inputs.randn(*shape, LENGTH, WIDTH, dtype=torch.float64) for _ in range(4)]


def _timed(ctx, call):
    """``call(q, k, v, g)`` on 4-D inputs, and on 3-D ones where the 4-D call raised (a file may handle
    one layout only): (result, inputs). A call past the budget fails. Nothing measured goes into the
    details: the same code gets the same report on an idle and a busy host."""
    for three_d in (False, True):
        inputs = _inputs(ctx, three_d)
        try:
            result = call(*inputs)
        except StudentFailure as exc:
            if exc.unanswered or three_d:
                late = exc.error.kind == "timeout"
                raise Fail(_failure(T("your gradients did not come back in time") if late else exc.describe()),
                           {"timed_out": late, **_size()}) from None
            continue
        return result, inputs
    raise AssertionError("unreachable")


def _failure(problem) -> T:
    return T("{problem} at B·H = {bh}, L = S = {n}, E = Ev = {e}, where a backward written by hand takes well "
             "under a second (the budget is {budget:g} s of your function's own time; waits for a busy "
             "processor do not count). This size is graded because numerical differentiation of your forward "
             "gives the same values as a backward pass and only its cost tells them apart ({passes:,} forward "
             "passes here); until your gradients come back here in time, the checks on them score nothing",
             problem=problem, **_size())


def _passed() -> T:
    return T("your gradients come back in time at B·H = {bh}, L = S = {n}, E = Ev = {e} (budget {budget:g} s of "
             "your function's own time): this size is graded because numerical differentiation of your forward "
             "({passes:,} forward passes here) could not finish in it, and values alone cannot tell it from a "
             "backward pass", **_size())


def _judge(names, grads, refs, judged) -> None:
    """The gradients right on small inputs (``judged``) must be right here too."""
    for name, got, ref in zip(names, grads, refs):
        if name not in judged:
            continue
        cmp = compare(got, ref, allowance(ref, None, torch.float64, GRAD_MULTIPLIER, GRAD_FLOOR_FACTOR))
        if not cmp.ok:
            raise Fail(_failure(T("your {name} is right on small inputs but not here ({comparison})", name=name,
                                  comparison=cmp.describe())), {"input": name, **_size(), **cmp.details()})


def backward_task(ctx):
    """``sdpa_backward``: the student's (dQ, dK, dV), judged where the output checks found them right."""
    result, (q, k, v, g) = _timed(ctx, lambda *t: ctx.call(*t, during=T("gradients at scale"), seconds=SECONDS,
                                                            trace=False))
    grads = ctx.tuple_out(result, [q.shape, k.shape, v.shape], NAMES, T("gradients at scale"))
    right = [name for name, check in zip(NAMES, OUTPUT_CHECKS) if ctx.passed_check(check)]
    _judge(NAMES, grads, closed_form(q, k, v, g), right)
    return _passed(), _size()


def sdpa_task(ctx):
    """``sdpa``: the student's forward and the gradients the child returns through it."""
    result, (q, k, v, g) = _timed(ctx, lambda q, k, v, g: ctx.call(
        q, k, v, wrt=(0, 1, 2), grad_output=g, during=T("gradients at scale"), seconds=SECONDS, trace=False))
    ctx.tensor_out(result, tuple(g.shape), T("gradients at scale"))
    if result.grads is None or any(grad is None for grad in result.grads):
        raise Fail(_failure(T("no gradients came back through your function")), _size())
    if ctx.passed_check("grad.reference"):
        _judge(SDPA_NAMES, result.grads, closed_form(q, k, v, g), SDPA_NAMES)
    return _passed(), _size()
