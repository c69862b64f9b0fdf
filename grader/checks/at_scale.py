"""``grad.at_scale``: the gradients at a size where numerical differentiation cannot keep up.

Central finite differences of the student's own forward give the same gradients as a backward pass,
to every digit a check can compare (issue 26: a hand-written backward replaced by them; issue 30: an
``sdpa`` forward in NumPy whose child replaced ``torch.autograd.grad`` by them). Values cannot tell
them apart; cost can. Differences need two forward passes per input element, a backward about two
forwards in all, so on inputs with many elements and a cheap forward (B·H = 8, L = S = 24,
E = Ev = 512: 294,912 elements) a backward takes milliseconds and differences take minutes, however
slow or fast the student's code is. The lengths are short on purpose: the course's own NumPy
softmax backward builds each row's S × S Jacobian in a Python loop, and at L = S = 256 that honest
code would need minutes too; here it needs 0.08 s (the budget is 2 s).

The call runs without the advisory recorders (``trace=False``), which would cost a row-by-row loop
several times its own time. The budget is the child's own time, measured by the parent
(``session.charged``: waits for a busy core are not charged, so the verdict is the same on an idle
and a loaded host). The gradients that were right on small inputs must be right here too (a file
cannot answer fast with anything at this size); a gradient wrong here by a named bug is that bug's
knock-on. The check has no points of its own; it gates the families its task names
(``Check.gates``): failed for no known bug, it leaves them nothing, since those points would be
open to gradients no backward produced. What a student can still do is in SECURITY.md.
"""
from __future__ import annotations

import torch

from reference_impl import attention_backward
from .base import Fail, StudentFailure
from .gradients import SDPA_NAMES, explained_by_known_bug
from .tolerance import GRAD_FLOOR_FACTOR, GRAD_MULTIPLIER, allowance, compare
from .variants import sdpa_variants
from ..i18n import T

BATCH, HEADS, LENGTH, WIDTH = 2, 4, 24, 512
SECONDS = 2.0   # the child's own time for one call; the slowest honest code measured takes 0.08 s (24x)


def size():
    return dict(bh=BATCH * HEADS, n=LENGTH, e=WIDTH, budget=SECONDS,
                passes=2 * 3 * BATCH * HEADS * LENGTH * WIDTH)


def _inputs(ctx, three_d: bool, dtype=torch.float64):
    shape = (BATCH * HEADS,) if three_d else (BATCH, HEADS)
    return [ctx.inputs.randn(*shape, LENGTH, WIDTH, dtype=dtype) for _ in range(4)]


# float64 first (differences are most exact there); float32 where every float64 call raised: this check
# grades cost, not dtypes, and a function that fails on float64 only (a float32 constant mixed into
# matmul) is charged for that by the dtype checks alone, not by the families this check gates.
LAYOUTS = ((torch.float64, False), (torch.float64, True), (torch.float32, False), (torch.float32, True))


def timed(ctx, call):
    """``call(q, k, v, g)`` on 4-D inputs, and on 3-D ones where the 4-D call raised (a file may handle
    one layout only), in float64 and then in float32 (``LAYOUTS``): (result, inputs). A call past the
    budget, out of memory, or that never answers fails here; any other exception is the function's
    own, reported (and diagnosed) as in any check: the float64 3-D call's, when every layout raised.
    Nothing measured goes into the details: the same code gets the same report on an idle and a busy
    host."""
    first = None
    for dtype, three_d in LAYOUTS:
        inputs = _inputs(ctx, three_d, dtype)
        try:
            return call(*inputs), inputs
        except StudentFailure as exc:
            # out of memory at this size is its cost, like time: numerical differentiation batched
            # into large blocks runs out of memory before it runs out of time (the same file meets
            # either first, by how much memory the host has left)
            if exc.unanswered or exc.out_of_memory:
                late = exc.error.kind == "timeout"
                raise Fail(failure(T("your gradients did not come back in time") if late else exc.describe()),
                           {"timed_out": late, **size()}) from None
            if dtype == torch.float64 and three_d:
                first = exc
    raise first


def failure(problem) -> T:
    return T("{problem} at B·H = {bh}, L = S = {n}, E = Ev = {e}, where a backward written by hand takes well "
             "under a second (the budget is {budget:g} s of your function's own time; waits for a busy "
             "processor do not count). This size is graded because numerical differentiation of your forward "
             "gives the same values as a backward pass and only its cost tells them apart ({passes:,} forward "
             "passes here); until your gradients come back here in time, the checks on them score nothing",
             problem=problem, **size())


def passed() -> T:
    return T("your gradients come back in time at B·H = {bh}, L = S = {n}, E = Ev = {e} (budget {budget:g} s of "
             "your function's own time): this size is graded because numerical differentiation of your forward "
             "({passes:,} forward passes here) could not finish in it, and values alone cannot tell it from a "
             "backward pass", **size())


def unproven(name, cmp) -> Fail:
    """Right on small inputs, wrong here, and no known bug explains it."""
    return Fail(failure(T("your {name} is right on small inputs but not here ({comparison})", name=name,
                           comparison=cmp.describe())), {"input": name, **size(), **cmp.details()})


def sdpa_task(ctx):
    """``sdpa``: the student's forward and the gradients the child returns through it."""
    what = T("gradients at scale")
    result, (q, k, v, g) = timed(ctx, lambda q, k, v, g: ctx.call(
        q, k, v, wrt=(0, 1, 2), grad_output=g, during=what, seconds=SECONDS, trace=False))
    ctx.tensor_out(result, tuple(g.shape), what)
    if result.grads is None or any(grad is None for grad in result.grads):
        raise Fail(failure(T("no gradients came back through your function")), size())
    for name, got, ref in zip(SDPA_NAMES, result.grads, attention_backward(q, k, v, g)):
        cmp = compare(got, ref, allowance(ref, None, q.dtype, GRAD_MULTIPLIER, GRAD_FLOOR_FACTOR))
        if cmp.ok:
            continue
        miss = Fail(T("{what}: the gradient with respect to {name} is wrong: {value}", what=what, name=name,
                      value=cmp.describe()), {"input": name, **size(), **cmp.details()})
        explained_by_known_bug(ctx, miss, result, SDPA_NAMES, lambda a, b, c: sdpa_variants(a, b, c),
                               [q, k, v], g, q.dtype, what)
        raise miss if miss.details.get("diagnosis") else unproven(name, cmp)
    return passed(), size()
