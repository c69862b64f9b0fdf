"""``mask`` and ``causal`` for sdpa and mha."""
from __future__ import annotations

import torch

from reference_impl import attention_weights, scaled_dot_product_attention
from .base import Fail, heatmap, with_cause
from .calls import record_bug, run_mha, run_sdpa
from .inputs import weights_from
from .tolerance import PROPERTY_TOLERANCE, relative_error
from .variants import explain, identify, sdpa_variants
from ..i18n import T

READBACK_NOISE = 1e-12  # weights read back through a pseudo-inverse in float64


def _small(ctx, dtype=torch.float32, L=None, S=None):
    B, H = ctx.inputs.distinct(2, 2, 4)
    L2, S2, E, Ev = ctx.inputs.distinct(4, 5, 14)
    L, S = L or L2, S or S2
    r = ctx.inputs.randn
    return (B, H, L, S), r(B, H, L, E, dtype=dtype), r(B, H, S, E, dtype=dtype), r(B, H, S, Ev, dtype=dtype)


def bool_broadcast(ctx):
    (B, H, L, S), q, k, v = _small(ctx)
    run_sdpa(ctx, q, k, v, ctx.inputs.bool_mask(L, S), what=T("boolean mask ({L}, {S}) broadcast over "
                                                              "batch and heads", L=L, S=S), heat=True)
    return T("a boolean (L, S) mask broadcast over batch and heads hides exactly the False "
             "keys")


def bool_per_batch(ctx):
    (B, H, L, S), q, k, v = _small(ctx)
    run_sdpa(ctx, q, k, v, ctx.inputs.bool_mask(B, 1, L, S),
             what=T("boolean mask ({B}, 1, {L}, {S}) that differs per batch element", B=B, L=L, S=S), heat=True)
    return T("a boolean mask that differs per batch element is applied per element")


def float_additive(ctx):
    (B, H, L, S), q, k, v = _small(ctx)
    run_sdpa(ctx, q, k, v, ctx.inputs.float_mask(L, S), what=T("float (additive) mask ({L}, {S}) with "
                                                               "-inf entries", L=L, S=S), heat=True)
    run_sdpa(ctx, q, k, v, ctx.inputs.float_mask(B, 1, 1, S), what=T("float padding mask ({B}, 1, 1, {S})",
                                                                     B=B, S=S),
             heat=True)
    return T("float masks are added to the scaled scores, broadcast as given")


def zero_weight(ctx):
    """Masked keys get zero weight (read back from the output, so "zero" is below read-back noise)."""
    L, S = ctx.inputs.distinct(2, 5, 14)
    q = ctx.inputs.randn(2, L, 16, dtype=torch.float64) * 3
    k = ctx.inputs.randn(2, S, 16, dtype=torch.float64) * 3
    mask = ctx.inputs.bool_mask(2, L, S)
    v = ctx.inputs.readout_values(2, keys=S)
    out = ctx.tensor_out(ctx.call(q, k, v, attn_mask=mask, during=T("a boolean mask, float64")), (2, L, v.size(-1)))
    w = weights_from(out, v)
    # How exactly this function's weights read back at all (a float32-inside computation reads back
    # to ~1e-7): the same call without the mask, against the reference weights.
    plain = ctx.tensor_out(ctx.call(q, k, v, during=T("the same inputs without a mask")), (2, L, v.size(-1)))
    noise = float((weights_from(plain, v) - attention_weights(q, k)).abs().max())
    leaked = float(w.masked_fill(mask, 0).abs().max())
    leaked = 0.0 if leaked <= max(READBACK_NOISE, 10 * noise) else leaked
    details = {"weights_submission": heatmap(w), "weights_reference": heatmap(attention_weights(q, k, mask)),
               "max_masked_weight": leaked}
    kept = float(torch.nan_to_num(w.double()).masked_fill(~mask, 0).sum(-1).max())
    if not leaked == 0.0 and kept < 1e-6:
        details["diagnosis"] = "mask_polarity"
        raise Fail(T("all the weight goes to the keys the mask hides and none to the keys it "
                     "allows: your boolean mask has the wrong polarity (True means the key "
                     "MAY be attended to)"), details)
    if not leaked == 0.0:
        raise Fail(T("masked keys still get weight (up to {leaked:.3g}); a masked key must "
                     "get 0: fill masked scores with -inf (or torch.finfo(dtype).min) before "
                     "the softmax", leaked=leaked), details)
    return T("masked keys get exactly zero weight")


def causal_square(ctx):
    L = ctx.inputs.randint(6, 14)
    (B, H, L, S), q, k, v = _small(ctx, L=L, S=L)
    run_sdpa(ctx, q, k, v, is_causal=True, what=T("is_causal=True with L = S = {L}", L=L), heat=True)
    return T("is_causal=True hides exactly the future keys")


def causal_rectangular(ctx):
    small, large = sorted(ctx.inputs.distinct(2, 5, 14))
    for L, S in ((small, large), (large, small)):
        _, q, k, v = _small(ctx, L=L, S=S)
        run_sdpa(ctx, q, k, v, is_causal=True, what=T("is_causal=True with L={L}, S={S} "
                                                      "(top-left aligned)", L=L, S=S),
                 heat=True)
    return T("is_causal=True is top-left aligned (ones(L, S).tril()) when L != S")


def causal_future(ctx):
    """Changing keys/values at positions >= p must not change outputs of queries < p."""
    L = ctx.inputs.randint(8, 14)
    p = ctx.inputs.randint(2, L - 2)
    q = ctx.inputs.randn(2, L, 8, dtype=torch.float64)
    k = ctx.inputs.randn(2, L, 8, dtype=torch.float64)
    v = ctx.inputs.randn(2, L, 6, dtype=torch.float64)
    k2, v2 = k.clone(), v.clone()
    k2[:, p:] = ctx.inputs.randn(2, L - p, 8, dtype=torch.float64)
    v2[:, p:] = ctx.inputs.randn(2, L - p, 6, dtype=torch.float64)
    a = ctx.tensor_out(ctx.call(q, k, v, is_causal=True, during=T("causal future probe")), (2, L, 6))
    b = ctx.tensor_out(ctx.call(q, k2, v2, is_causal=True, during=T("causal future probe")), (2, L, 6))
    # The first call once more: a function that answers one input two ways (dropout left on) could
    # pass this comparison by luck, on a draw where its random choices happen to agree.
    again = ctx.tensor_out(ctx.call(q, k, v, is_causal=True, during=T("causal future probe")), (2, L, 6))
    if not bool(((again == a) | (again.isnan() & a.isnan())).all()):
        details = {"changed_from": p}
        record_bug(ctx, "nondeterministic", details)
        raise Fail(T("the same inputs twice gave different outputs, so whether future keys change earlier "
                     "outputs cannot be judged: is dropout (or other randomness) still on?"), details)
    change = (a[:, :p] - b[:, :p]).double().abs()
    worst = float(torch.nan_to_num(change, nan=float("inf")).max())
    if not worst <= PROPERTY_TOLERANCE * max(1.0, float(a.double().abs().max())):
        row = int(torch.nan_to_num(change, nan=float("inf")).amax(dim=(0, 2)).argmax())
        details = {"changed_from": p, "max_change": worst}
        # Both answers are one named bug's (the mask applied after the softmax, say): that bug.
        names = {identify(out, sdpa_variants(q, k_, v_, is_causal=True),
                          relative_error(out, scaled_dot_product_attention(q, k_, v_, is_causal=True)))
                 for out, k_, v_ in ((a, k, v), (b, k2, v2))}
        name = names.pop() if len(names) == 1 else None
        if name:
            record_bug(ctx, name, details)
            ctx.attention_seen = True  # attention with a known bug is still attention
        message = T("changing keys and values at positions {p}..{value} changed the output "
                    "of query {row} by {worst:.3g}: with is_causal=True query i may only "
                    "see keys 0..i", p=p, value=L - 1, row=row, worst=worst)
        raise Fail(with_cause(message, explain(name)) if name else message, details)
    return T("changing future keys and values leaves earlier outputs unchanged")


# ---- mha ------------------------------------------------------------------------------
def mha_dims(ctx):
    B = ctx.inputs.randint(2, 3)
    H = ctx.inputs.randint(2, 4)
    dk = ctx.inputs.randint(3, 6)
    L, S = ctx.inputs.distinct(2, 5, 12, avoid=(H, dk, H * dk, B))
    return B, H, dk, L, S


def mha_inputs(ctx, B, L, S, D, dtype=torch.float32, self_attention=False):
    r = ctx.inputs.randn
    x_q = r(B, L, D, dtype=dtype)
    x_kv = x_q.clone() if self_attention else r(B, S, D, dtype=dtype)
    ws = tuple(r(D, D, dtype=dtype, std=D ** -0.5) for _ in range(4))
    return x_q, x_kv, ws


def mha_bool(ctx):
    B, H, dk, L, S = mha_dims(ctx)
    x_q, x_kv, ws = mha_inputs(ctx, B, L, S, H * dk)
    run_mha(ctx, x_q, x_kv, ws, H, ctx.inputs.bool_mask(L, S), what=T("boolean mask ({L}, {S})", L=L, S=S))
    run_mha(ctx, x_q, x_kv, ws, H, ctx.inputs.bool_mask(B, 1, L, S), what=T("boolean mask ({B}, 1, {L}, {S})",
                                                                            B=B, L=L, S=S))
    run_mha(ctx, x_q, x_kv, ws, H, ctx.inputs.bool_mask(B, H, L, S),
            what=T("boolean mask ({B}, {H}, {L}, {S}), one per head", B=B, H=H, L=L, S=S))
    return T("boolean masks (shared, per batch element and per head) are applied as given")


def mha_float(ctx):
    B, H, dk, L, S = mha_dims(ctx)
    x_q, x_kv, ws = mha_inputs(ctx, B, L, S, H * dk)
    run_mha(ctx, x_q, x_kv, ws, H, ctx.inputs.float_mask(L, S), what=T("float mask ({L}, {S})", L=L, S=S))
    return T("a float mask is added to every head's scaled scores")


def mha_causal_square(ctx):
    B, H, dk, L, _ = mha_dims(ctx)
    x_q, x_kv, ws = mha_inputs(ctx, B, L, L, H * dk, self_attention=True)
    run_mha(ctx, x_q, x_kv, ws, H, is_causal=True, what=T("causal self-attention, L = {L}", L=L))
    return T("is_causal=True hides the future in every head")


def mha_causal_rectangular(ctx):
    B, H, dk, L, S = mha_dims(ctx)
    x_q, x_kv, ws = mha_inputs(ctx, B, L, S, H * dk)
    run_mha(ctx, x_q, x_kv, ws, H, is_causal=True, what=T("causal cross-attention, L={L}, S={S} "
                                                          "(top-left)", L=L, S=S))
    return T("is_causal=True is top-left aligned when L != S")
