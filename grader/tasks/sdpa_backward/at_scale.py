"""``grad.at_scale`` for ``sdpa_backward``: the student's (dQ, dK, dV) at the size where numerical
differentiation cannot keep up (grader/checks/at_scale.py says why; it times the call the same way
for ``sdpa``)."""
from __future__ import annotations

from . import checks as backward
from ...checks.at_scale import SECONDS, passed, size, timed, unproven
from ...checks.tuples import parts_failure
from ...i18n import T


def backward_task(ctx):
    """``sdpa_backward``: the student's (dQ, dK, dV), judged where the output checks found them right (or
    wrong by a named bug, which is then a knock-on here)."""
    what = T("gradients at scale")
    result, (q, k, v, g) = timed(ctx, lambda *t: ctx.call(*t, during=what, seconds=SECONDS, trace=False))
    parts = backward.judged_parts(ctx)
    if not parts:  # nothing was right on small inputs: only the time is judged here
        ctx.tuple_out(result, [q.shape, k.shape, v.shape], backward.NAMES, what)
        return passed(), size()
    # A gradient wrong here may only be wrong as the output checks found it (the one bug named there;
    # at this size the whole catalogue would cost the parent seconds).
    _, _, failures = backward.assess(ctx, result, (q, k, v, g, None, False, None), what, parts,
                                     only=backward.named_bugs(ctx))
    named = [f for f in failures if f[1]]
    if named:
        raise parts_failure(what, named, explain=backward.SPEC.explain)
    if failures:
        raise unproven(failures[0][0], failures[0][3])
    return passed(), size()
