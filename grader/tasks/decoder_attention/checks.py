"""Checks of the ``decoder_attention`` task: a decoder layer's two attentions over a padded batch.

``decoder_attention(target, memory, target_lengths, memory_lengths)`` returns
(self_out, cross_out): masked (causal) self-attention of the target on itself, then
cross-attention of self_out to the encoder output ``memory``; each sequence b has
``target_lengths[b]`` real positions of T and ``memory_lengths[b]`` of S, the rest is padding.
Padded keys get no weight, the cross-attention is not causal, and both outputs are zero at
padded target positions. The student builds the padding masks; the parent computes the
reference, and on a miss the known wrong layers (``decoder_bugs``), in float64.
"""
from __future__ import annotations

import torch

from reference_impl import scaled_dot_product_attention
from ...checks import tuples
from .bugs import NAMES, explain, keep_keys, layer, wrong_layers
from ...checks.tuples import Outputs, judge
from ...i18n import T

SPEC = Outputs(names=NAMES, explain=explain, dtype_bug="outputs_wrong_dtype")


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


def diagnosis_reference(args, kwargs, scale=None) -> tuple | None:
    """The right outputs of one call ``(target, memory, target_lengths, memory_lengths)``, in float64
    (its scale is fixed by the width: none other): the task's ``Grading.reference``."""
    if scale is not None:
        return None
    target, memory, t_len, m_len = args[:4]
    return reference(target.double(), memory.double(), t_len, m_len)


def run_decoder(ctx, target, memory, t_len, m_len, *, what: str):
    outs, worst = judge(ctx, SPEC, (target, memory, t_len, m_len), {},
                        shapes=[target.shape, target.shape],
                        ref64=reference(target, memory, t_len, m_len),
                        same=reference(target, memory, t_len, m_len, target.dtype),
                        variants=lambda: wrong_layers(target, memory, t_len, m_len),
                        what=what)
    return worst


# ---- inputs -----------------------------------------------------------------------------
def dims(ctx, memory_longer=True):
    """B, T, S, D with S > T (``memory_longer``) or S < T, never left to the draw: a mask built from
    the other sequence's lengths (memory_lengths for the target, or the other way round) shows
    wherever one sequence is longer than the other, so which checks see it must not depend on the seed."""
    B = ctx.inputs.randint(3, 5)
    T, S, D = ctx.inputs.distinct(3, 5, 12)
    if (S > T) != memory_longer:
        T, S = S, T
    return B, T, S, D


def lengths(ctx, B, n, full=False):
    """Per-sequence lengths in [1, n]: one full, one short (at most n - 2), the rest anywhere."""
    if full:
        return torch.full((B,), n, dtype=torch.int64)
    out = torch.tensor([ctx.inputs.randint(1, n) for _ in range(B)], dtype=torch.int64)
    out[0], out[1] = n, ctx.inputs.randint(1, max(1, n - 2))
    return out[ctx.inputs.perm(B)]


def batch(ctx, dtype=torch.float64, pad_target=True, pad_memory=True, memory_longer=True):
    B, T, S, D = dims(ctx, memory_longer)
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
    args = batch(ctx, memory_longer=False)  # the one padded batch whose target is the longer sequence
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
    args = batch(ctx, pad_target=False, memory_longer=False)
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
