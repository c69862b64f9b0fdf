# expect: padding
# cause: masked_scores_zero
"""Hidden scores filled with 1e-10 instead of -1e10: the exponent's sign lost in a typo.

Written for this project: the slip of `masked_fill(mask == 0, 1e-10)` where `-1e10` (or -1e9) was
meant, seen in tutorial decoders. Issue 40's example of one bug that breaks every masking check.
Bug: a hidden key's score is 1e-10, about 0, so future and padded keys keep almost their full weight.
"""
import math

import torch


def _attend(q, k, v, keep):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    scores = scores.masked_fill(~keep, 1e-10)
    return torch.softmax(scores, dim=-1) @ v


def decoder_attention(target, memory, target_lengths, memory_lengths):
    B, T, _ = target.shape
    S = memory.size(1)
    target_real = torch.arange(T)[None, :] < target_lengths[:, None]   # (B, T)
    memory_real = torch.arange(S)[None, :] < memory_lengths[:, None]   # (B, S)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    self_out = _attend(target, target, target, causal & target_real[:, None, :])
    cross_out = _attend(self_out, memory, memory, memory_real[:, None, :])
    rows = target_real[:, :, None]
    return self_out * rows, cross_out * rows
