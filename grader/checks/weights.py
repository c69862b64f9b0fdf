"""``weights``: the attention weights are a probability distribution over the keys."""
from __future__ import annotations

import math

import torch

from reference_impl import attention_weights
from .base import Fail, heatmap
from .inputs import weights_from
from .variants import STRUCTURAL
from .tolerance import PROPERTY_TOLERANCE
from ..i18n import T


def distribution(ctx):
    """The weights, read back from the output: rows must be non-negative and sum to 1."""
    L, S = ctx.inputs.distinct(2, 6, 16)
    E = 24
    q = ctx.inputs.randn(1, 2, L, E, dtype=torch.float64)
    k = ctx.inputs.randn(1, 2, S, E, dtype=torch.float64)
    v = ctx.inputs.readout_values(1, 2, keys=S)
    result = ctx.call(q, k, v, during=T("float64 inputs"))
    w = weights_from(ctx.tensor_out(result, (1, 2, L, v.size(-1)), "float64 inputs"), v)
    ref = attention_weights(q, k)
    details = {"case": f"L={L}, S={S}, E={E}; weights read back from the output",
               "weights_submission": heatmap(w), "weights_reference": heatmap(ref)}
    if not torch.isfinite(w).all():
        raise Fail(T("your attention weights contain NaN or inf"), details)
    structural = next((b for b in ctx.diagnoses if b in STRUCTURAL), None)
    if structural:  # weights read back through a bug that scrambles them say nothing on their own
        details["diagnosis"] = structural
    rows = w.sum(-1)
    details["row_sums"] = [round(float(x), 4) for x in rows[0, 0, :16]]
    if float(w.min()) < -1e-9:  # read-back noise is ~1e-15
        raise Fail(T("some attention weights are negative (smallest {value:.3g}): a softmax "
                     "never gives negative weights", value=float(w.min())), details)
    if float((rows - 1).abs().max()) > 1e-6:
        cols = w.sum(-2)
        if float((cols - 1).abs().max()) < 1e-6:
            details["diagnosis"] = "softmax_queries"
            raise Fail(T("your weights sum to 1 down each column, not along each row: the "
                         "softmax normalises over the queries (dim=-2) instead of the keys "
                         "(dim=-1)"), details)
        mean = float(rows.mean())
        if abs(mean - 1 / math.sqrt(E)) < 1e-6:
            details["diagnosis"] = "scale_after_softmax"
            raise Fail(T("your weight rows sum to {mean:.4f} = 1/√d_k instead of 1: you "
                         "scale after the softmax; the 1/√d_k belongs on the scores", mean=mean), details)
        raise Fail(T("your weight rows sum to between {value:.4f} and {value2:.4f} instead "
                     "of 1: the weights are not a softmax over the keys",
                     value=float(rows.min()), value2=float(rows.max())), details)
    return T("every row of weights is non-negative and sums to 1 over the keys")


def value_shift(ctx):
    """Adding a constant vector to every value row adds it to every output row (weights sum to 1)."""
    L, S, E, Ev = ctx.inputs.distinct(4, 5, 14)
    q = ctx.inputs.randn(2, L, E, dtype=torch.float64)
    k = ctx.inputs.randn(2, S, E, dtype=torch.float64)
    v = ctx.inputs.randn(2, S, Ev, dtype=torch.float64)
    c = ctx.inputs.randn(Ev, dtype=torch.float64) * 3
    a = ctx.tensor_out(ctx.call(q, k, v, during=T("value-shift probe")), (2, L, Ev))
    b = ctx.tensor_out(ctx.call(q, k, v + c, during=T("value-shift probe")), (2, L, Ev))
    gap = float(((b - a) - c).abs().max())
    if not gap <= PROPERTY_TOLERANCE * max(1.0, float(c.abs().max())):
        raise Fail(T("adding a constant vector to every value row should add exactly that "
                     "vector to every output row (the weights sum to 1); yours is off by "
                     "{gap:.3g}", gap=gap), {"max_error": gap})
    return T("shifting the values by a constant shifts the output by it")
