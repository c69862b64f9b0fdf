"""Checks of the ``decoder_attention`` task: a decoder layer's two attentions over a padded batch.

``decoder_attention(target, memory, target_lengths, memory_lengths)`` returns
(self_out, cross_out): masked (causal) self-attention of the target on itself, then
cross-attention of self_out to the encoder output ``memory``; each sequence b has
``target_lengths[b]`` real positions of T and ``memory_lengths[b]`` of S, the rest is padding.
Padded keys get no weight, the cross-attention is not causal, and both outputs are zero at
padded target positions. The student builds the padding masks; the parent computes the
reference and the usual wrong versions from the reference attention in float64.
"""
from __future__ import annotations

import torch

from reference_impl import scaled_dot_product_attention
from . import tuples, variants
from .tuples import Outputs, judge
from ..i18n import N_, T

NAMES = ("self_out", "cross_out")
BUGS = {
    "padding_polarity": N_("your padding mask has the wrong polarity: positions j < length are the real ones "
                           "(True = may attend), j >= length is padding"),
    "padding_on_queries": N_("you mask padded queries (rows) instead of padded keys (columns): every real query "
                             "must not attend to padded keys, so the mask is (B, 1, 1, S)-shaped over the keys"),
    "causal_in_cross": N_("your cross-attention is causal: the decoder may see the whole encoder output; only "
                          "the self-attention hides future target positions"),
    "self_not_causal": N_("your self-attention is not causal: target position i may attend only to 0..i"),
    "lengths_plus_one": N_("your lengths are off by one: you let position j = length (the first padded one) be "
                           "attended; the real positions are 0..length-1"),
    "lengths_minus_one": N_("your lengths are off by one: you hide position length-1, the last real one; the "
                            "real positions are 0..length-1"),
    "padded_rows_not_zeroed": N_("the outputs at padded target positions must be zero (they are padding): "
                                 "multiply by the target's padding mask"),
    "memory_lengths_for_target": N_("you use the memory lengths for the target's padding (or the other way round)"),
    "cross_queries_from_target": N_("your cross-attention's queries are the target; in a decoder layer they are "
                                    "the self-attention's output (self_out)"),
    "no_scale": N_("you do not scale the scores: divide Q·Kᵀ by √D before the softmax"),
}
# The family each of these bugs is charged to (grader/causes.py), and their sentences for it.
variants.register(BUGS, {
    "padding_polarity": ("padding",), "padding_on_queries": ("padding",), "causal_in_cross": ("cross",),
    "self_not_causal": ("causal",), "lengths_plus_one": ("lengths",), "lengths_minus_one": ("lengths",),
    "padded_rows_not_zeroed": ("padding",), "memory_lengths_for_target": ("padding",),
    "cross_queries_from_target": ("output",),
})


def explain(name):
    """The sentence for a bug; "bug:keys_only" is the same bug with the output rows zeroed right."""
    text = BUGS.get(name.split(":")[0], "") if name else ""
    return T(text) if text else ""  # a T: rendered in the reader's language


SPEC = Outputs(names=NAMES, explain=explain)
# Bugs that do not touch the target's key mask: zeroing the rows "correctly" changes nothing.
NO_SCOPE = {f"{b}:keys_only" for b in ("causal_in_cross", "self_not_causal", "cross_queries_from_target",
                                       "no_scale", "padded_rows_not_zeroed", "padding_on_queries")}


def keep_keys(lengths, n, shift=0):
    """(B, 1, n): True where key j < length (+ shift) is a real position."""
    return (torch.arange(n)[None, :] < (lengths[:, None] + shift))[:, None, :]


def layer(target, memory, t_len, m_len, bug=None):
    """The reference (bug None) or one wrong version, in float64; NaN marks a fully masked row.

    A student usually zeroes the padded output rows with the same mask they built for the keys,
    so a wrong mask is applied to the rows too; "bug:keys_only" zeroes the rows correctly.
    """
    bug, _, scope = (bug or "").partition(":")
    bug = bug or None
    x, mem = target.double(), memory.double()
    B, T, _ = x.shape
    S = mem.size(1)
    shift = {"lengths_plus_one": 1, "lengths_minus_one": -1}.get(bug, 0)
    tl, ml = (m_len, t_len) if bug == "memory_lengths_for_target" else (t_len, m_len)
    t_keys, m_keys = keep_keys(tl, T, shift), keep_keys(ml, S, shift)
    if bug == "padding_polarity":
        t_keys, m_keys = ~t_keys, ~m_keys
    if bug == "padding_on_queries":
        t_keys = keep_keys(tl, T).transpose(1, 2).expand(B, T, T)
        m_keys = keep_keys(tl, T).transpose(1, 2).expand(B, T, S)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    self_mask = t_keys & causal if bug != "self_not_causal" else t_keys.expand(B, T, T)
    scale = 1.0 if bug == "no_scale" else None
    self_out = _attend(x, x, self_mask, scale)
    cross_mask = m_keys & torch.ones(T, S, dtype=torch.bool).tril() if bug == "causal_in_cross" \
        else m_keys.expand(B, T, S)
    queries = x if bug == "cross_queries_from_target" else self_out
    cross_out = _attend(queries, mem, cross_mask, scale)  # a NaN query row stays NaN
    if bug != "padded_rows_not_zeroed":
        if scope == "keys_only" or bug == "padding_on_queries":
            rows = keep_keys(t_len, T)
        else:  # the key mask as built, wrong lengths or polarity included
            rows = t_keys
        rows = rows.transpose(1, 2)  # (B, T, 1): the target positions kept
        self_out, cross_out = (torch.where(rows, o, torch.zeros_like(o)) for o in (self_out, cross_out))
    return self_out, cross_out


def _attend(q, kv, keep, scale=None):
    """Reference attention, but a fully masked row is NaN (what masked_fill(-inf) gives), not zeros."""
    out = scaled_dot_product_attention(q, kv, kv, keep, scale=scale)
    dead = ~keep.any(-1, keepdim=True)
    return torch.where(dead, torch.full_like(out, float("nan")), out)


def reference(target, memory, t_len, m_len, dtype=None):
    """The contract's outputs; in ``dtype`` (the same-dtype reference for the allowance) if given."""
    if dtype is None:
        return tuple(torch.nan_to_num(o) for o in layer(target, memory, t_len, m_len))
    T, S = target.size(1), memory.size(1)
    rows = keep_keys(t_len, T).transpose(1, 2)
    self_out = scaled_dot_product_attention(target, target, target, keep_keys(t_len, T) &
                                            torch.ones(T, T, dtype=torch.bool).tril())
    cross_out = scaled_dot_product_attention(self_out, memory, memory, keep_keys(m_len, S).expand(-1, T, S))
    zero = torch.zeros((), dtype=target.dtype)
    return torch.where(rows, self_out, zero), torch.where(rows, cross_out, zero)


def run_decoder(ctx, target, memory, t_len, m_len, *, what: str, bugs=tuple(BUGS)):
    outs, worst = judge(ctx, SPEC, (target, memory, t_len, m_len), {},
                        shapes=[target.shape, target.shape],
                        ref64=reference(target, memory, t_len, m_len),
                        same=reference(target, memory, t_len, m_len, target.dtype),
                        variants=lambda: {name: layer(target, memory, t_len, m_len, name)
                                          for b in bugs for name in (b, b + ":keys_only")
                                          if name not in NO_SCOPE},
                        what=what)
    return worst


# ---- inputs -----------------------------------------------------------------------------
def dims(ctx):
    B = ctx.inputs.randint(3, 5)
    T, S, D = ctx.inputs.distinct(3, 5, 12)
    return B, T, S, D


def lengths(ctx, B, n, full=False):
    """Per-sequence lengths in [1, n]: one full, one short (at most n - 2), the rest anywhere."""
    if full:
        return torch.full((B,), n, dtype=torch.int64)
    out = torch.tensor([ctx.inputs.randint(1, n) for _ in range(B)], dtype=torch.int64)
    out[0], out[1] = n, ctx.inputs.randint(1, max(1, n - 2))
    return out[ctx.inputs.perm(B)]


def batch(ctx, dtype=torch.float64, pad_target=True, pad_memory=True):
    B, T, S, D = dims(ctx)
    r = ctx.inputs.randn
    return (r(B, T, D, dtype=dtype), r(B, S, D, dtype=dtype),
            lengths(ctx, B, T, full=not pad_target), lengths(ctx, B, S, full=not pad_memory))


def _what(label, target, memory, t_len, m_len):
    return (f"{label} (B={target.size(0)}, T={target.size(1)}, S={memory.size(1)}, D={target.size(2)}, "
            f"target_lengths={t_len.tolist()}, memory_lengths={m_len.tolist()})")


# ---- checks -----------------------------------------------------------------------------
def shapes(ctx):
    args = batch(ctx, torch.float32)
    worst = run_decoder(ctx, *args, what=_what("a padded float32 batch", *args))
    return T("both outputs match the reference on a padded batch (max error {worst:.2g})", worst=worst)


def float64(ctx):
    args = batch(ctx)
    worst = run_decoder(ctx, *args, what=_what("a padded float64 batch", *args))
    return T("float64 inputs give float64-accurate results (max error {worst:.2g})", worst=worst)


def _dtype_args(ctx, dtype):
    return batch(ctx, dtype)


dtype_case = lambda dtype: tuples.dtype_case(dtype, _dtype_args, SPEC,  # noqa: E731
                                             lambda args: [args[0].shape, args[0].shape])


def padding_target(ctx):
    args = batch(ctx, pad_memory=False)
    run_decoder(ctx, *args, what=_what("padded targets, full memory", *args))
    return T("padded target positions are hidden from the self-attention and zero in both "
             "outputs")


def padding_memory(ctx):
    args = batch(ctx, pad_target=False)
    run_decoder(ctx, *args, what=_what("full targets, padded memory", *args))
    return T("padded memory positions get no cross-attention weight")


def causal_self(ctx):
    args = batch(ctx, pad_target=False, pad_memory=False)
    run_decoder(ctx, *args, what=_what("no padding: the causal self-attention", *args))
    return T("the self-attention is causal: position i sees target positions 0..i")


def cross_not_causal(ctx):
    B, steps, S, D = dims(ctx)  # steps: the target's length (T would hide the message class)
    S = max(S, steps + 2)   # memory longer than the target: a causal cross-attention cannot hide
    r = ctx.inputs.randn
    args = (r(B, steps, D, dtype=torch.float64), r(B, S, D, dtype=torch.float64),
            torch.full((B,), steps, dtype=torch.int64), torch.full((B,), S, dtype=torch.int64))
    run_decoder(ctx, *args, what=_what("no padding, memory longer than the target", *args))
    return T("the cross-attention sees the whole encoder output (it is not causal)")


def length_edges(ctx):
    """Lengths of 1, n - 1 and n in one batch: an off-by-one shows on every edge."""
    B, steps, S, D = dims(ctx)  # steps: the target's length (T would hide the message class)
    B = 4
    r = ctx.inputs.randn
    t_len = torch.tensor([1, steps - 1, steps, 2], dtype=torch.int64)[ctx.inputs.perm(B)]
    m_len = torch.tensor([S, 1, S - 1, 2], dtype=torch.int64)[ctx.inputs.perm(B)]
    args = (r(B, steps, D, dtype=torch.float64), r(B, S, D, dtype=torch.float64), t_len, m_len)
    run_decoder(ctx, *args, what=_what("lengths at the edges (1, n - 1, n)", *args))
    return T("lengths of 1, n - 1 and n are all handled exactly")
