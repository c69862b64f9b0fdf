"""Known wrong tiled forwards, computed in the trusted parent to name a student's bug.

Each is the blocked algorithm of ``tiled_attention`` with one step broken, run in float64 with the
student's block size (``online``). Two of them only show in floating point, so they are run in the
student's own dtype (``NUMERIC``): a running maximum that is never subtracted (exp overflows on
scores in the hundreds) and float32 accumulators for float64 inputs (recognised where
float64 scores go beyond float32's range: NaN where the reference is finite, or float32's error
in a float64 answer).
"""
from __future__ import annotations

import math

import torch

from ...checks import variants
from ...i18n import N_, T

BUGS = {
    "no_accumulator_rescale": N_("when the running maximum grows you rescale the normaliser but not the "
                                 "accumulator: multiply acc by exp(m_old − m_new) before adding the new block"),
    "normaliser_before_rescale": N_("you add the new block's sum to the normaliser before rescaling it, so the new "
                                    "block is rescaled too: l = l · exp(m_old − m_new) + rowsum(exp(s − m_new))"),
    "max_updated_first": N_("you overwrite the running maximum before computing the correction, so "
                            "exp(m_old − m_new) is always 1 and neither the normaliser nor the accumulator is "
                            "rescaled: keep m_old until both are rescaled"),
    "correction_inverted": N_("your correction factor is inverted: when the running maximum grows, the old "
                              "normaliser and accumulator must shrink by exp(m_old − m_new), not grow by "
                              "exp(m_new − m_old)"),
    "block_edge_off_by_one": N_("your key blocks are one short: block j covers keys j·b .. j·b + b − 1 "
                                "(slice [start:start + block_size]), so you skip one key per block"),
    "last_partial_block_dropped": N_("you drop the last, partial block of keys when S is not a multiple of "
                                     "block_size: loop with range(0, S, block_size) and slice up to min(start + b, S)"),
    "no_final_division": N_("you never divide the accumulator by the normaliser at the end"),
    "no_scale": N_("you do not scale the scores: multiply Q·Kᵀ by 1/√E in every block"),
    "normalised_twice": N_("you divide by the normaliser twice (acc / l / l, or the probabilities of each block "
                           "and again at the end): divide the accumulator by l once, after the last block"),
    "tiles_from_query_length": N_("your number of key blocks comes from the query length L (ceil(L / block_size)) "
                                  "instead of the key length S: with more keys than queries the last keys are "
                                  "never read; count blocks with ceil(S / block_size)"),
    "max_not_subtracted": N_("you never subtract the running maximum: exp(s) overflows for scores in the "
                             "hundreds (float32 reaches infinity at exp(89)); compute p = exp(s − m_new) and "
                             "rescale with exp(m_old − m_new)"),
    "float32_accumulators": N_("for float64 inputs part of your computation is float32 (the scores cast with "
                               ".float(), or a running maximum, normaliser or accumulator made by torch.zeros(...) "
                               "without dtype=query.dtype): float64 scores beyond float32's range overflow; keep "
                               "everything in the inputs' dtype"),
    "output_dtype_differs": N_("your output's dtype is not the inputs': return the result in query.dtype "
                               "(float32 inputs need a float32 output, float64 inputs a float64 one)"),
}
# The family each of these bugs is charged to (grader/causes.py): the task's catalogue (Task.bugs).
CATALOGUE = variants.ATTENTION.extend(BUGS, {
    "no_accumulator_rescale": ("online",), "normaliser_before_rescale": ("online",),
    "correction_inverted": ("online",), "max_updated_first": ("online",),
    "block_edge_off_by_one": ("output",), "last_partial_block_dropped": ("output",),
    "no_final_division": ("output",), "normalised_twice": ("output",), "tiles_from_query_length": ("output",),
    "max_not_subtracted": ("stability",), "float32_accumulators": ("stability",),
    "output_dtype_differs": ("dtype",),
}, by_check=("output_dtype_differs", "float32_accumulators"))  # read off the output's dtype and precision
NUMERIC = ("max_not_subtracted",)  # shows only in the student's dtype: run there (see candidates)


def explain(name):
    text = BUGS.get(name, "") if name else ""
    return T(text) if text else ""  # a T: rendered in the reader's language


def online(q, k, v, block, bug=None, dtype=torch.float64, length=None):
    """The blocked forward in ``dtype`` with ``bug`` switched on (None: correct); ``length``: the
    query length the call had, where ``q`` holds only sampled rows of it."""
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    L, S = length or q.size(-2), k.size(-2)
    scale = 1.0 if bug == "no_scale" else 1 / math.sqrt(q.size(-1))
    m = torch.full(q.shape[:-1] + (1,), float("-inf"), dtype=dtype)
    l = torch.zeros_like(m)
    acc = torch.zeros(q.shape[:-1] + (v.size(-1),), dtype=dtype)
    stop = S - S % block if bug == "last_partial_block_dropped" and S % block else S
    if bug == "tiles_from_query_length":
        stop = min(S, -(-L // block) * block)
    for start in range(0, stop, block):
        end = min(start + block - (bug == "block_edge_off_by_one"), S)
        if end <= start:
            continue
        s = q @ k[..., start:end, :].transpose(-2, -1) * scale
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        if bug == "max_not_subtracted":
            p, corr = torch.exp(s), torch.ones_like(m)
        elif bug == "max_updated_first":  # m = m_new first: every block is weighted by its own maximum
            p, corr = torch.exp(s - m_new), torch.ones_like(m)
        elif bug == "correction_inverted":  # the first block's factor multiplies zeros: any finite one
            p, corr = torch.exp(s - m_new), torch.where(torch.isfinite(m), torch.exp(m_new - m), 1.0)
        else:
            p, corr = torch.exp(s - m_new), torch.exp(m - m_new)
        l = (l + p.sum(-1, keepdim=True)) * corr if bug == "normaliser_before_rescale" else l * corr + p.sum(-1, keepdim=True)
        acc = (acc if bug == "no_accumulator_rescale" else acc * corr) + p @ v[..., start:end, :]
        m = m_new
    if bug == "no_final_division":
        return acc
    return acc / l / l if bug == "normalised_twice" else acc / l


def candidates(q, k, v, block) -> dict:
    """Every known wrong forward on these inputs: {name: output (float64)}; the numeric ones in
    the inputs' dtype (their overflow is the bug)."""
    out = {b: online(q, k, v, block, b) for b in BUGS
           if b not in NUMERIC and b not in ("float32_accumulators", "output_dtype_differs")}
    for b in NUMERIC:
        out[b] = online(q, k, v, block, b, dtype=q.dtype).double()
    return out


def numeric_match(out, q, k, v, block) -> str | None:
    """The numeric bug whose overflow pattern ``out`` shares: NaN and infinities at (nearly) the same
    places, the finite values equal. The student's sums run in another order than the parent's (one
    thread there, several here), so a value at the edge of overflowing may land on either side. Some
    values must be finite in both: an answer that is NaN everywhere matches every overflow."""
    out = out.double()
    for b in NUMERIC:
        cand = online(q, k, v, block, b, dtype=q.dtype).double()
        bad_out, bad_cand = ~torch.isfinite(out), ~torch.isfinite(cand)
        if not bad_cand.any() or (bad_out != bad_cand).float().mean() > 0.05:
            continue
        both = ~bad_out & ~bad_cand
        if both.any() and float((out[both] - cand[both]).abs().max()) <= 1e-3 * max(1.0, float(cand[both].abs().max())):
            return b
    return None


def wrong_outputs(args, kwargs) -> tuple:
    """(the right output, {bug: the output with that bug}) on one call's arguments, in float64, for
    ``attn-grader tasks validate``."""
    q, k, v, block = args[:4]
    return online(q, k, v, block), candidates(q, k, v, block)
