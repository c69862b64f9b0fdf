"""mha ``output``, ``dtype`` and ``heads``: the whole layer, and how it splits and merges heads."""
from __future__ import annotations

import torch

from reference_impl import multi_head_attention
from .base import Fail
from .calls import run_mha
from .masks import mha_dims, mha_inputs
from .output import check_returned, no_stale_answers
from .tolerance import relative_error
from .variants import explain, identify, mha_variant
from ..i18n import T

TRANSPOSE_BUGS = ("split_no_transpose", "merge_no_transpose", "split_merge_no_transpose")
# An interleaved split, undone by the same merge, is invisible when every head attends uniformly
# (the probe below): it shows, and is named, on the ordinary multi-head call.
HEAD_BUGS = TRANSPOSE_BUGS + ("heads_interleaved",)


def self_attention(ctx):
    B, H, dk, L, _ = mha_dims(ctx)
    x_q, x_kv, ws = mha_inputs(ctx, B, L, L, H * dk, self_attention=True)
    _, _, c, _ = run_mha(ctx, x_q, x_kv, ws, H, what=T("self-attention (B={B}, L={L}, "
                                                       "d_model={value}, {H} heads)",
                                                       B=B, L=L, value=H * dk, H=H))
    return T("self-attention matches the float64 reference (max error {max_error:.2g})", max_error=c.max_error)


def cross_attention(ctx):
    B, H, dk, L, S = mha_dims(ctx)
    x_q, x_kv, ws = mha_inputs(ctx, B, L, S, H * dk)
    _, _, c, _ = run_mha(ctx, x_q, x_kv, ws, H, what=T("cross-attention (B={B}, L={L}, S={S}, "
                                                       "d_model={value}, {H} heads)",
                                                       B=B, L=L, S=S, value=H * dk, H=H))
    return T("cross-attention with L != S matches the reference (max error {max_error:.2g})",
             max_error=c.max_error)


def fresh(ctx):
    """The same shapes three times with new values: a memoised answer shows up here."""
    B, H, dk, L, S = mha_dims(ctx)

    def run(i):
        x_q, x_kv, ws = mha_inputs(ctx, B, L, S, H * dk)
        return run_mha(ctx, x_q, x_kv, ws, H, what=T("call {value} of 3 with the same shapes "
                                                     "and new values", value=i + 1))[0]
    return no_stale_answers(run)


def float64(ctx):
    B, H, dk, L, S = mha_dims(ctx)
    x_q, x_kv, ws = mha_inputs(ctx, B, L, S, H * dk, dtype=torch.float64)
    _, _, c, _ = run_mha(ctx, x_q, x_kv, ws, H, what=T("float64 inputs"))
    return T("float64 inputs give float64-accurate results (max error {max_error:.2g})", max_error=c.max_error)


def precision(ctx):
    """Reported only: float64 inputs computed in float64 throughout."""
    from .output import strict_float64
    B, H, dk, L, S = mha_dims(ctx)
    x_q, x_kv, ws = mha_inputs(ctx, B, L, S, H * dk, dtype=torch.float64)
    out = ctx.tensor_out(ctx.call(x_q, x_kv, *ws, H, during=T("float64 precision")), tuple(x_q.shape))
    return strict_float64(out, multi_head_attention(x_q, x_kv, *ws, H))


def dtype_case(dtype):
    def check(ctx):
        B, H, dk, L, S = mha_dims(ctx)
        x_q, x_kv, ws = mha_inputs(ctx, B, L, S, H * dk, dtype=dtype)
        result = ctx.call(x_q, x_kv, *ws, H, during=T("{dtype} inputs", dtype=dtype))
        ref = multi_head_attention(x_q.double(), x_kv.double(), *(w.double() for w in ws), H)
        return check_returned(ctx, result, tuple(x_q.shape), dtype, ref)
    return check


def single_head(ctx):
    B, _, dk, L, S = mha_dims(ctx)
    x_q, x_kv, ws = mha_inputs(ctx, B, L, S, 3 * dk, dtype=torch.float64)
    run_mha(ctx, x_q, x_kv, ws, 1, what=T("num_heads = 1 (d_model={value})", value=3 * dk))
    return T("with one head your layer matches the reference")


def uniform_probe(ctx):
    """w_k = 0 makes every head attend uniformly whatever the scale: only value split and merge matter."""
    B, H, dk, L, S = mha_dims(ctx)
    D = H * dk
    x_q, x_kv, ws = mha_inputs(ctx, B, L, S, D, dtype=torch.float64)
    ws = (ws[0], torch.zeros_like(ws[1]), ws[2], ws[3])
    out = ctx.tensor_out(ctx.call(x_q, x_kv, *ws, H, during=T("uniform-attention head probe")), (B, L, D))
    ref = multi_head_attention(x_q, x_kv, *ws, H)
    err = relative_error(out, ref)
    if err <= 1e-9:
        return None
    candidates = {name: mha_variant(x_q, x_kv, ws, H, split_ok=name == "merge_no_transpose",
                                    merge_ok=name == "split_no_transpose") for name in TRANSPOSE_BUGS}
    candidates["no_out_proj"] = mha_variant(x_q, x_kv, ws, H, out_proj=False)
    candidates["weights_not_transposed"] = mha_variant(x_q, x_kv, ws, H, transpose_w=False)
    return identify(out, candidates, err) or f"unexplained:{err:.3g}"


def split_merge(ctx):
    B, H, dk, L, S = mha_dims(ctx)
    H = max(H, 3)
    x_q, x_kv, ws = mha_inputs(ctx, B, L, S, H * dk, dtype=torch.float64)
    probe = uniform_probe(ctx)
    if probe in HEAD_BUGS:
        raise Fail(T("with every head attending uniformly (w_k = 0) your heads' values come "
                     "out in the wrong places: {bug}", bug=explain(probe)),
                   {"diagnosis": probe, "probe": "uniform attention, w_k = 0"})
    try:
        run_mha(ctx, x_q, x_kv, ws, H, what=T("{H} heads of d_k={dk}", H=H, dk=dk))
        return T("heads are split and merged in order ({H} heads of d_k={dk}, L={L}, S={S})",
                 H=H, dk=dk, L=L, S=S)
    except Fail as miss:
        cause = miss.details.get("diagnosis")
        if cause in HEAD_BUGS:
            raise Fail(T("{H} heads: {value}", H=H, value=explain(cause)), miss.details) from None
        if cause and cause not in HEAD_BUGS:
            return (T("heads are split and merged correctly; the output differs for another "
                      "reason: {value} (see the other checks)", value=explain(cause)))
        if ctx.passed_check("heads.single_head"):
            raise Fail(T("your layer is right with one head but wrong with {H}: check how "
                         "you split d_model into heads (reshape to (B, L, H, d_k), then "
                         "transpose(1, 2)) and merge them back (transpose(1, 2), then "
                         "reshape to (B, L, d_model))", H=H), miss.details) from None
        raise Fail(T("your layer is wrong even with one head, so the heads cannot be checked "
                     "on their own: {message}", message=miss.message), miss.details) from None
