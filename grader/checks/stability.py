"""``stability``: logits in the hundreds (float32) and thousands (float64) stay finite and correct."""
from __future__ import annotations

import torch

from reference_impl import scaled_dot_product_attention
from .base import Fail, shape_str
from .calls import diagnose
from .tolerance import allowance, compare
from .variants import sdpa_variants
from ..i18n import T

STABILITY_MULTIPLIER = 10.0  # rounding of huge logits depends on the order of operations


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


def float32(ctx):
    top = _case(ctx, torch.float32, 14.0, "float32 inputs with logits in the hundreds", twins=True)
    return T("finite and correct with float32 logits up to {top:.0f}", top=top)


def float64(ctx):
    top = _case(ctx, torch.float64, 45.0, "float64 inputs with logits in the thousands")
    return T("finite and correct with float64 logits up to {top:.0f}", top=top)
