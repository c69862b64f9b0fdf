"""Checks of the ``tiled_attention`` task: the forward pass in key blocks with an online softmax.

``tiled_attention(query, key, value, block_size)`` must equal softmax(Q Kᵀ/√E) V while never
holding the L×S score matrix: keys (and values) are taken ``block_size`` at a time, with a
running row maximum m, normaliser l and accumulator acc rescaled by exp(m_old − m_new)
whenever the maximum grows. Values are judged against the float64 reference; the known bugs
are the same algorithm with one step wrong, run here in float64 with the same block size.
Memory is measured by the parent from the run's cgroup on L = S = 8192.
"""
from __future__ import annotations

import math

import torch

from reference_impl import scaled_dot_product_attention
from . import variants
from .base import Fail, shape_str
from .tolerance import allowance, compare, relative_error
from .variants import HOME, identify
from ..i18n import N_, T

MiB = 1 << 20
LONG = 8192      # L = S of the memory check
LONG_E = 64
BUGS = {
    "no_accumulator_rescale": N_("when the running maximum grows you rescale the normaliser but not the "
                                 "accumulator: multiply acc by exp(m_old − m_new) before adding the new block"),
    "normaliser_before_rescale": N_("you add the new block's sum to the normaliser before rescaling it, so the new "
                                    "block is rescaled too: l = l · exp(m_old − m_new) + rowsum(exp(s − m_new))"),
    "block_edge_off_by_one": N_("your key blocks are one short: block j covers keys j·b .. j·b + b − 1 "
                                "(slice [start:start + block_size]), so you skip one key per block"),
    "last_partial_block_dropped": N_("you drop the last, partial block of keys when S is not a multiple of "
                                     "block_size: loop with range(0, S, block_size) and slice up to min(start + b, S)"),
    "no_final_division": N_("you never divide the accumulator by the normaliser at the end"),
    "no_scale": N_("you do not scale the scores: multiply Q·Kᵀ by 1/√E in every block"),
}
# The family each of these bugs is charged to (grader/causes.py), and their sentences for it.
variants.register(BUGS, {
    "no_accumulator_rescale": ("online",), "normaliser_before_rescale": ("online",),
    "block_edge_off_by_one": ("output",), "last_partial_block_dropped": ("output",),
    "no_final_division": ("output",),
})


def explain(name):
    text = BUGS.get(name, "") if name else ""
    return T(text) if text else ""  # a T: rendered in the reader's language


def online(q, k, v, block, bug=None):
    """The blocked forward in float64 with ``bug`` switched on (None: correct)."""
    q, k, v = q.double(), k.double(), v.double()
    S = k.size(-2)
    scale = 1.0 if bug == "no_scale" else 1 / math.sqrt(q.size(-1))
    m = torch.full(q.shape[:-1] + (1,), float("-inf"), dtype=torch.float64)
    l = torch.zeros_like(m)
    acc = torch.zeros(q.shape[:-1] + (v.size(-1),), dtype=torch.float64)
    stop = S - S % block if bug == "last_partial_block_dropped" and S % block else S
    for start in range(0, stop, block):
        end = min(start + block - (bug == "block_edge_off_by_one"), S)
        if end <= start:
            continue
        s = q @ k[..., start:end, :].transpose(-2, -1) * scale
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        p = torch.exp(s - m_new)
        corr = torch.exp(m - m_new)
        l = (l + p.sum(-1, keepdim=True)) * corr if bug == "normaliser_before_rescale" else l * corr + p.sum(-1, keepdim=True)
        acc = (acc if bug == "no_accumulator_rescale" else acc * corr) + p @ v[..., start:end, :]
        m = m_new
    return acc if bug == "no_final_division" else acc / l


def run_tiled(ctx, q, k, v, block, *, what: str):
    result = ctx.call(q, k, v, block, during=what)
    out = ctx.tensor_out(result, q.shape[:-1] + (v.size(-1),), what)
    ref64 = scaled_dot_product_attention(q.double(), k.double(), v.double())
    cmp = compare(out, ref64, allowance(ref64, scaled_dot_product_attention(q, k, v), q.dtype))
    if cmp.ok:
        if out.dtype != q.dtype:
            raise Fail(T("{what}: your output is {got} for {want} inputs", what=what,
                         got=str(out.dtype).replace("torch.", ""), want=str(q.dtype).replace("torch.", "")))
        ctx.attention_seen = True
        return cmp.max_error
    cause = identify(out, {b: online(q, k, v, block, b) for b in BUGS}, relative_error(out, ref64))
    if cause:
        ctx.attention_seen = True  # a named tiling bug: the function is attention in blocks
        if cause not in ctx.diagnoses:
            ctx.diagnoses.append(cause)
    elif cmp.nonfinite:
        # An overflow where the reference is finite, after an update bug was named: computed in
        # float64 the buggy update does not overflow, so no variant matches; it is that bug's.
        cause = next((b for b in ctx.diagnoses if HOME.get(b) == ("online",)), None)
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
    S = ctx.inputs.randint(17, 29)
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
    S = ctx.inputs.randint(9, 15)
    for block, label in ((1, "block_size = 1"), (S, "block_size = S"), (S + 7, "block_size > S")):
        run_tiled(ctx, *_qkv(ctx, L, S, E, Ev), block, what=T("{label} (S={S})", label=label, S=S))
    return T("block sizes of 1, S and more than S all give the reference")


def float64(ctx):
    L, E, Ev = ctx.inputs.distinct(3, 6, 14)
    S = ctx.inputs.randint(17, 29)
    worst = run_tiled(ctx, *_qkv(ctx, L, S, E, Ev), _block_not_dividing(ctx, S), what=T("float64 inputs"))
    return T("float64 inputs give float64-accurate results (max error {worst:.2g})", worst=worst)


def dtype_case(dtype):
    def check(ctx):
        L, E, Ev = ctx.inputs.distinct(3, 6, 14)
        S = ctx.inputs.randint(17, 29)
        q, k, v = _qkv(ctx, L, S, E, Ev, dtype=dtype)
        out = ctx.tensor_out(ctx.call(q, k, v, 8, during=T("{dtype} inputs", dtype=dtype)), (2, 3, L, Ev))
        if out.dtype != dtype:
            raise Fail(T("for {value} inputs your output is {value2}",
                         value=str(dtype).replace('torch.', ''), value2=str(out.dtype).replace('torch.', '')))
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
    return T("no overflow with float32 scores in the hundreds: the running maximum is "
             "subtracted")


def long_sequence_memory(ctx):
    """L = S = 8192: the parent reads the run's cgroup around the call; a full score matrix fails."""
    r = ctx.inputs.randn
    q, k, v = r(1, LONG, LONG_E), r(1, LONG, LONG_E), r(1, LONG, LONG_E)
    block = 256
    what = T("L = S = {L}, E = {E}, float32, block_size={block}", L=LONG, E=LONG_E, block=block)
    # On the CPU even on a GPU worker: the cgroup counts host memory, not the accelerator's.
    result = ctx.call(q, k, v, block, measure_memory=True, run_on="cpu", during=what)
    out = ctx.tensor_out(result, (1, LONG, LONG_E), what)
    rows = ctx.inputs.perm(LONG)[:64]
    ref64 = scaled_dot_product_attention(q[:, rows].double(), k.double(), v.double())
    cmp = compare(out[:, rows], ref64, allowance(ref64, scaled_dot_product_attention(q[:, rows], k, v), q.dtype))
    if not cmp.ok:
        details = cmp.details()
        known = {b: online(q[:, rows], k, v, block, b) for b in ctx.diagnoses if b in BUGS}
        cause = identify(out[:, rows], known, relative_error(out[:, rows], ref64)) if known else None
        if cause:  # the bug the other checks named, at this length too: not charged again
            details["diagnosis"] = cause
        raise Fail(T("{what}: on 64 sampled rows, {comparison}{cause}", what=what, comparison=cmp.describe(),
                     cause=T(". Likely cause: {cause}", cause=explain(cause)) if cause else ""), details)
    full = LONG * LONG * 4
    peak = result.memory_peak
    if peak is None:
        return (T("output right on {what}; peak memory not measured: this sandbox has no "
                  "cgroup to read (the server measures it and fails a full {value} MiB score "
                  "matrix)", what=what, value=full // MiB)), {"measured": False}
    details = {"measured": True, "peak_mib": round(peak / MiB, 1), "full_scores_mib": full // MiB}
    if peak >= full:  # holding one full score matrix costs at least this much
        raise Fail(T("{what}: your call's memory grew by {value:.0f} MiB (measured by the "
                     "grader from your run's cgroup); one L×S float32 score matrix is "
                     "{value2} MiB: process the keys in blocks and never build the full "
                     "matrix", what=what, value=peak / MiB, value2=full // MiB), details)
    return T("{what}: memory grew by {value:.0f} MiB (a full score matrix is {value2} MiB)",
             what=what, value=peak / MiB, value2=full // MiB), details
