"""Edges of sdpa_backward's input space no other case draws (grader/checks/edge_cases.py)."""
from __future__ import annotations

import torch

from . import checks as backward
from ...checks.base import Fail
from ...checks.edge_cases import _named_overflow
from ...checks.tolerance import allowance, compare
from ...checks.variants import explain
from ...i18n import T


def large_scores(ctx):
    """Scores near 1e40: float64 holds them, float32 does not (its largest is 3.4e38).

    The scores are exact in any order of operations, so a backward that recomputes them (P = exp(S −
    LSE), block by block) meets the same numbers: query and key are small integers times 2^66 and
    E = 16, so every product, sum and the default scale 1/4 are exact. The rows are one-hot (no row
    has two top keys): dV routes grad_out (judged as usual); dQ and dK are judged to the rounding of dS
    (eps · |dP|) that dQ = scale·dS·K multiplies by |K| ~ 1e20. What fails is what overflows: NaN or
    inf where the reference is finite. L = S: a formula that is wrong (or raises) only when L != S
    is the output checks' to charge.
    """
    parts = backward._right(ctx)
    L, Ev = ctx.inputs.distinct(2, 5, 12)
    E = 16
    q, k, v, g = backward._case(ctx, L, L, E, Ev)
    q, k = torch.round(q * 2), torch.round(k * 2)
    for _ in range(200):  # no ties: at 1e40, LSE = max + log(count of tied keys) rounds to the max
        top2 = (q @ k.transpose(-2, -1)).topk(2, dim=-1).values  # exact integers
        tied = top2[..., 0] == top2[..., 1]
        if not tied.any():
            break
        q = torch.where(tied[..., None], torch.round(ctx.inputs.randn(*q.shape, dtype=torch.float64) * 2), q)
    q, k = q * 2.0 ** 66, k * 2.0 ** 66
    what = T("float64 scores beyond float32's range (about 1e40, L = S = {L}, E = {E})", L=L, E=E)
    result = ctx.call(q, k, v, g, during=what)
    outs = ctx.tuple_out(result, [q.shape, k.shape, v.shape], backward.NAMES, what)
    refs = backward.reference_grads(q, k, v, g)
    scale = E ** -0.5
    dp = float((g @ v.transpose(-2, -1)).abs().max())
    rounding = {"dQ": 64 * torch.finfo(torch.float64).eps * dp * float(k.abs().max()) * scale * L,
                "dK": 64 * torch.finfo(torch.float64).eps * dp * float(q.abs().max()) * scale * L}
    failures = []
    for name, out, ref in zip(backward.NAMES, outs, refs):
        if name not in parts:
            continue
        cmp = compare(out, ref, max(allowance(ref, None, torch.float64, backward.SPEC.multiplier,
                                              backward.SPEC.floor_factor), rounding.get(name, 0.0)))
        if not cmp.ok:
            failures.append((name, cmp))
    if not failures:
        return T("no overflow with float64 scores beyond float32's range: the backward keeps the inputs' dtype "
                 "and subtracts each row's maximum") + backward._noting(parts)
    name, cmp = failures[0]
    earlier = sorted(backward.named_bugs(ctx))
    if earlier and not any(c.nonfinite for _, c in failures):
        # Finite but wrong, in a function whose formula the output checks already found wrong: at
        # these scores its wrong dS is multiplied by |K| ~ 1e20. That bug's knock-on, not an overflow.
        raise Fail(T("{what}: {wrong} wrong; {name}: {comparison}. Likely cause: {cause}.", what=what,
                     wrong=", ".join(n for n, _ in failures), name=name, comparison=cmp.describe(),
                     cause=explain(earlier[0])),
                   {"case": what, "wrong": [n for n, _ in failures], "diagnosis": earlier[0], **cmp.details()})
    miss = Fail(T("{what}: {wrong} wrong; {name}: {comparison}.", what=what,
                  wrong=", ".join(n for n, _ in failures), name=name, comparison=cmp.describe()),
                {"case": what, "wrong": [n for n, _ in failures], **cmp.details()})
    raise _named_overflow(ctx, miss, "overflow_in_backward", lambda: (q / 2.0 ** 66, k / 2.0 ** 66, v, g),
                          dtype_bug="grads_wrong_dtype")
