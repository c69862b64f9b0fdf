# expect: padding
# bug: zeroes self_out at padded target positions but leaves cross_out's padded rows as computed
"""The zeroing done once, right after the self-attention, as if it carried over: cross_out's padded
rows attend from zero queries and get the mean of the real memory values instead of zeros.

Style: boolean masks (True = may attend), torch.where for every fill.
"""
import math

import torch


def decoder_attention(target, memory, target_lengths, memory_lengths):
    B, T, D = target.shape
    S = memory.shape[1]
    t_real = torch.arange(T, device=target.device)[None] < target_lengths[:, None]
    m_real = torch.arange(S, device=target.device)[None] < memory_lengths[:, None]
    allowed = torch.ones(T, T, dtype=torch.bool, device=target.device).tril()[None] & t_real[:, None, :]
    neg = torch.tensor(float("-inf"), dtype=target.dtype, device=target.device)
    s = torch.where(allowed, target @ target.transpose(-1, -2) / math.sqrt(D), neg)
    self_out = torch.where(t_real[..., None], torch.softmax(s, -1) @ target, torch.zeros((), dtype=target.dtype))
    c = torch.where(m_real[:, None, :], self_out @ memory.transpose(-1, -2) / math.sqrt(D), neg)
    cross_out = torch.softmax(c, -1) @ memory
    return self_out, cross_out
