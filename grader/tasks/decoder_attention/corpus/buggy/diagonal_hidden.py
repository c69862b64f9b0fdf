# expect: causal
# bug: the causal mask hides the diagonal too (triu with diagonal=0), so position i never sees itself
"""``torch.triu(ones, diagonal=0)`` used as the "future" mask: the diagonal belongs to the present,
so position i loses itself, and position 0 has no key left: its self-attention row is NaN, and so
is its cross-attention row.

Style: float 0/-inf additive masks, positions from arange.
"""
import math

import torch


def decoder_attention(target, memory, target_lengths, memory_lengths):
    B, T, D = target.shape
    S = memory.shape[1]
    pos_t = torch.arange(T, device=target.device)
    pos_s = torch.arange(S, device=target.device)
    inf = float("-inf")
    future = torch.zeros(T, T, dtype=target.dtype, device=target.device).masked_fill(
        torch.triu(torch.ones(T, T, dtype=torch.bool, device=target.device)), inf)
    t_bias = torch.zeros(B, 1, T, dtype=target.dtype, device=target.device).masked_fill(
        (pos_t[None] >= target_lengths[:, None])[:, None, :], inf)
    m_bias = torch.zeros(B, 1, S, dtype=target.dtype, device=target.device).masked_fill(
        (pos_s[None] >= memory_lengths[:, None])[:, None, :], inf)
    w = torch.softmax(target @ target.transpose(1, 2) / math.sqrt(D) + future + t_bias, -1)
    self_out = w @ target
    cross_out = torch.softmax(self_out @ memory.transpose(1, 2) / math.sqrt(D) + m_bias, -1) @ memory
    real = (pos_t[None] < target_lengths[:, None])[..., None]
    return self_out * real, cross_out * real
