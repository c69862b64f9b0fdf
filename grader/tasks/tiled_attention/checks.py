"""Checks of the ``tiled_attention`` task: the forward pass in key blocks with an online softmax.

``tiled_attention(query, key, value, block_size)`` must equal softmax(Q Kᵀ/√E) V while never
holding the L×S score matrix: keys (and values) are taken ``block_size`` at a time, with a
running row maximum m, normaliser l and accumulator acc rescaled by exp(m_old − m_new)
whenever the maximum grows. Values are judged against the float64 reference; the known bugs
are the same algorithm with one step wrong, run here in float64 with the same block size.
The memory checks are in ``tiled_memory``.
"""
from __future__ import annotations

import math

import torch

from reference_impl import scaled_dot_product_attention
from ...checks.base import Fail, shape_str
from .bugs import BUGS, CATALOGUE, candidates, explain, numeric_match, online  # noqa: F401  (BUGS, online: the tests' names)
from ...checks.tolerance import allowance, compare, relative_error
from ...checks.variants import identify
from ...i18n import T

# The catalogue of known tiling bugs (and the family each is charged to) lives in tiled_bugs.


def run_tiled(ctx, q, k, v, block, *, what: str):
    result = ctx.call(q, k, v, block, during=what)
    out = ctx.tensor_out(result, q.shape[:-1] + (v.size(-1),), what)
    ref64 = scaled_dot_product_attention(q.double(), k.double(), v.double())
    cmp = compare(out, ref64, allowance(ref64, scaled_dot_product_attention(q, k, v), q.dtype))
    if cmp.ok:
        if out.dtype != q.dtype:  # right values in the wrong dtype: the dtype family's bug
            raise Fail(T("{what}: your output is {got} for {want} inputs", what=what,
                         got=str(out.dtype).replace("torch.", ""), want=str(q.dtype).replace("torch.", "")),
                       {"diagnosis": "output_dtype_differs"})
        ctx.attention_seen = True
        return cmp.max_error
    cause = identify(out, candidates(q, k, v, block), relative_error(out, ref64))
    if cause is None and cmp.nonfinite:
        cause = numeric_match(out, q, k, v, block)
    if cause is None and q.dtype == torch.float64 and out.dtype == torch.float64:
        ref32 = scaled_dot_product_attention(q.float(), k.float(), v.float())
        if (cmp.nonfinite and not torch.isfinite(ref32).all()) or \
                compare(out, ref64, allowance(ref64, ref32, torch.float32)).ok:
            cause = "float32_accumulators"  # float32's overflow, or float32's error, in a float64 answer
    if cause:
        ctx.attention_seen = True  # a named tiling bug: the function is attention in blocks
        if cause not in ctx.diagnoses:
            ctx.diagnoses.append(cause)
    elif cmp.nonfinite:
        # An overflow where the reference is finite, after an update bug was named: computed in
        # float64 the buggy update does not overflow, so no variant matches; it is that bug's.
        cause = next((b for b in ctx.diagnoses if CATALOGUE.homes.get(b) == ("online",)), None)
    raise Fail(cmp.failure(what, explain(cause) if cause else ""),
               {"case": what, "shapes": shape_str(q, k, v), "block_size": block, "diagnosis": cause,
                **cmp.details()})


def _qkv(ctx, L, S, E, Ev, batch=(2, 3), dtype=torch.float64):
    r = ctx.inputs.randn
    return r(*batch, L, E, dtype=dtype), r(*batch, S, E, dtype=dtype), r(*batch, S, Ev, dtype=dtype)


def _block_not_dividing(ctx, S):
    return next(b for b in (ctx.inputs.randint(3, 6), 4, 5, 3) if S % b)


# ---- checks -----------------------------------------------------------------------------
def shapes(ctx):
    L, E, Ev = ctx.inputs.distinct(3, 6, 14)
    S = L + ctx.inputs.randint(8, 16)  # more keys than queries, by more than a block: the key count matters
    block = _block_not_dividing(ctx, S)
    worst = run_tiled(ctx, *_qkv(ctx, L, S, E, Ev, dtype=torch.float32), block,
                      what=T("float32, L={L}, S={S}, block_size={block} (S not a multiple of "
                             "it)", L=L, S=S, block=block))
    N = ctx.inputs.randint(2, 4)
    worst = max(worst, run_tiled(ctx, *_qkv(ctx, L, S, E, Ev, batch=(N,), dtype=torch.float32), block,
                                 what=T("3-D inputs (N={N}), block_size={block}", N=N, block=block)))
    return T("matches the reference with S not a multiple of block_size (max error "
             "{worst:.2g})", worst=worst)


def block_extremes(ctx):
    L, E, Ev = ctx.inputs.distinct(3, 5, 10)
    S = L + ctx.inputs.randint(4, 10)
    for block, label in ((1, "block_size = 1"), (S, "block_size = S"), (S + 7, "block_size > S")):
        run_tiled(ctx, *_qkv(ctx, L, S, E, Ev), block, what=T("{label} (S={S})", label=label, S=S))
    return T("block sizes of 1, S and more than S all give the reference")


def float64(ctx):
    L, E, Ev = ctx.inputs.distinct(3, 6, 14)
    S = L + ctx.inputs.randint(8, 16)
    block = _block_not_dividing(ctx, S)
    q, k, v = _qkv(ctx, L, S, E, Ev)
    worst = run_tiled(ctx, q, k, v, block, what=T("float64 inputs"))
    return T("float64 inputs give float64-accurate results (max error {worst:.2g})", worst=worst)


def dtype_case(dtype):
    def check(ctx):
        L, E, Ev = ctx.inputs.distinct(3, 6, 14)
        S = ctx.inputs.randint(17, 29)
        q, k, v = _qkv(ctx, L, S, E, Ev, dtype=dtype)
        out = ctx.tensor_out(ctx.call(q, k, v, 8, during=T("{dtype} inputs", dtype=dtype)), (2, 3, L, Ev))
        if out.dtype != dtype:
            raise Fail(T("for {value} inputs your output is {value2}",
                         value=str(dtype).replace('torch.', ''), value2=str(out.dtype).replace('torch.', '')),
                       {"diagnosis": "output_dtype_differs"})
        if not torch.isfinite(out).all():
            raise Fail(T("your output has NaN or infinite values on ordinary inputs"))
        return T("a {value} tensor of shape (2, 3, {L}, {Ev})",
                 value=str(dtype).replace('torch.', ''), L=L, Ev=Ev)
    return check


def rescale(ctx):
    """Keys growing along S: the running maximum rises in every block, so each rescale matters."""
    L, E, Ev = ctx.inputs.distinct(3, 5, 10)
    S = 24
    q, k, v = _qkv(ctx, L, S, E, Ev)
    q, k = q.abs(), k.abs() * torch.linspace(0.3, 3.0, S, dtype=torch.float64)[:, None]  # positive, growing
    run_tiled(ctx, q, k, v, 4, what=T("scores that grow from block to block (S={S}, "
                                      "block_size=4)", S=S))
    return T("the accumulator and the normaliser are rescaled whenever the running maximum "
             "grows")


def large_scores(ctx):
    L, E, Ev = ctx.inputs.distinct(3, 6, 12)
    S = ctx.inputs.randint(17, 29)
    q, k, v = _qkv(ctx, L, S, E, Ev, dtype=torch.float32)
    run_tiled(ctx, q * 40, k, v, 5, what=T("float32 scores in the hundreds (query × 40)"))
    # Scores near 1e40: float64 holds them, float32 overflows (its largest is 3.4e38), so a running
    # state kept in float32 shows as NaN where the reference is finite.
    q, k, v = _qkv(ctx, L, S, E, Ev)
    run_tiled(ctx, q * 1e20, k * 1e20, v, 5, what=T("float64 scores beyond float32's range (about 1e40)"))
    return T("no overflow with float32 scores in the hundreds, nor with float64 scores beyond float32's range: "
             "the running maximum is subtracted and the running state keeps the inputs' dtype")
