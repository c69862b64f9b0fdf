"""``stability``: logits in the hundreds (float32) and thousands (float64) stay finite and correct.

float32 looks at rounding too: near-tied keys make half precision inside fail on every draw.
float64 looks at overflow only: every row's largest logit is above 709 (exp() of it is inf in
float64, so a softmax that does not subtract the row maximum fails on every draw) and leads the
row's runner-up by far, so the weights are one-hot to far below float64's tolerance. float32
rounding inside (the softmax-in-float32 idiom, which the scored checks admit and
``precision.float64`` reports) then never shows, whatever the draw, where near ties made it show
on some draws and not others.
"""
from __future__ import annotations

import torch

from reference_impl import scaled_dot_product_attention
from .base import Fail, shape_str
from .calls import diagnose
from .tolerance import allowance, compare
from .variants import sdpa_variants
from ..i18n import T

STABILITY_MULTIPLIER = 10.0  # rounding of huge logits depends on the order of operations
# float64 rows: the top logit is above OVERFLOW (exp(709.8) is float64's largest) and leads the
# runner-up by LEAD: exp(-LEAD / 4) is ~1e-17, so even a scale off by √E (E <= 16) keeps the
# weights one-hot, and whether a scale bug shows here does not depend on the draw either.
OVERFLOW, LEAD = 800.0, 160.0


def _case(ctx, dtype, std, what, twins=False):
    L, S, E, Ev = ctx.inputs.distinct(4, 6, 16)
    r = ctx.inputs.randn
    q, k, v = r(2, L, E, dtype=dtype, std=std), r(2, S, E, dtype=torch.float64, std=std), r(2, S, Ev, dtype=dtype)
    if twins:
        # Keys in near-identical pairs: every row's largest logit has a twin about 0.5 below or
        # above it, so its two top weights are close and the rounding of the logits shows in the
        # output on every draw (half-precision arithmetic inside fails for any inputs, not for
        # some), while float32 rounding (~1e-4 at these logits) stays far inside the tolerance.
        k[:, 1::2] = k[:, 0:S - 1:2] + r(2, S // 2, E, dtype=torch.float64, std=std * 2.5e-3)
    k = k.to(dtype)
    if not twins:
        q = _peaked_rows(ctx, q, k, std)
    out = ctx.tensor_out(ctx.call(q, k, v, during=what), (2, L, Ev), what)
    ref64 = scaled_dot_product_attention(q.double(), k.double(), v.double())
    same = scaled_dot_product_attention(q, k, v)
    logits = (q.double() @ k.double().transpose(-2, -1)) / E ** 0.5
    # With logits this large, one rounding of a logit moves a weight by eps · |logit|: any correct
    # order of operations (logsumexp, scaling q first) may make that error, whatever the reference did.
    rounding = 8 * torch.finfo(dtype).eps * float(logits.abs().max()) * max(1.0, float(ref64.abs().max()))
    cmp = compare(out, ref64, max(allowance(ref64, same, dtype, multiplier=STABILITY_MULTIPLIER), rounding))
    details = {"case": what, "shapes": shape_str(q, k, v), "max_abs_logit": round(float(logits.abs().max()), 1),
               **cmp.details()}
    if cmp.nonfinite:
        raise Fail(T("{what}: your output has NaN or inf (logits reach {value:.0f}): exp() "
                     "overflows; subtract each row's maximum before exp (softmax is "
                     "unchanged by it) or use torch.softmax", what=what, value=details['max_abs_logit']), details)
    if not cmp.ok:
        # A bug named elsewhere (the missing scale, say) may or may not push these logits past the
        # tolerance depending on the draw: naming it makes the verdict the same for every draw.
        cause = diagnose(ctx, out, ref64, sdpa_variants(q, k, v), cmp, lambda: ctx.call(q, k, v, during=what),
                         lambda: scaled_dot_product_attention(q.half(), k.half(), v.half()), details)
        raise Fail(cmp.failure(what, cause), details)
    return float(logits.abs().max())


def _peaked_rows(ctx, q, k, std):
    """``q`` with every row redrawn until its top logit is above OVERFLOW and LEAD above the next."""
    E = q.size(-1)
    for _ in range(200):
        top2 = ((q.double() @ k.double().transpose(-2, -1)) / E ** 0.5).topk(2, dim=-1).values  # (2, L, 2)
        redo = (top2[..., 0] < OVERFLOW) | (top2[..., 0] - top2[..., 1] < LEAD)  # (2, L)
        if not redo.any():
            return q
        fresh = ctx.inputs.randn(*q.shape, dtype=torch.float64, std=std).to(q.dtype)
        q = torch.where(redo[..., None], fresh, q)
    raise RuntimeError("no peaked rows drawn in 200 tries")  # P < 1e-100 per row: a grader bug


def float32(ctx):
    top = _case(ctx, torch.float32, 14.0, "float32 inputs with logits in the hundreds", twins=True)
    return T("finite and correct with float32 logits up to {top:.0f}", top=top)


def float64(ctx):
    top = _case(ctx, torch.float64, 45.0, "float64 inputs with logits in the thousands")
    return T("finite and correct with float64 logits up to {top:.0f}", top=top)
