# expect: padding
"""Padding masks sized by the longest sequence of the batch, the ``len2mask`` helper of ESPnet.

Source: https://github.com/espnet/espnet, egs3/ami/diar1/local/utils.py, ``len2mask`` (Apache-2.0):
``max_len = length.max()`` and ``arange(max_len) < length.unsqueeze(1)``. Adapted: the helper is
rewritten and used for both masks of the task's decoder layer (causal self-attention, then
cross-attention), with torch.softmax.

The bug (issue 40): the masks are (B, max(lengths)) wide, not (B, T) / (B, S). Whenever some sequence
fills the padded length they happen to fit; when none does (padding.no_full_row) they no longer
broadcast against the scores and the function raises. Everything else is right.
"""
import math

import torch


def len2mask(length):
    max_len = int(length.max())  # the longest sequence, not the padded length
    return torch.arange(max_len, device=length.device).expand(len(length), max_len) < length.unsqueeze(1)


def _attend(q, kv, keep):
    scores = q @ kv.transpose(1, 2) / math.sqrt(q.size(-1))        # (B, T, n)
    weights = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
    return torch.nan_to_num(weights) @ kv                          # (B, T, D)


def decoder_attention(target, memory, target_lengths, memory_lengths):
    T = target.size(1)
    real_t, real_m = len2mask(target_lengths), len2mask(memory_lengths)   # (B, max len)
    causal = torch.ones(T, T, dtype=torch.bool, device=target.device).tril()
    self_out = _attend(target, target, real_t[:, None, :] & causal)
    cross_out = _attend(self_out, memory, real_m[:, None, :])
    rows = real_t[:, :, None]
    return self_out * rows, cross_out * rows
