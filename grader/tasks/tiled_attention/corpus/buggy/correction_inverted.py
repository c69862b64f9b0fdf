# expect: online
# bug: rescales the old sum and accumulator by exp(m_new - m_old) instead of exp(m_old - m_new)
"""The correction factor written with its exponent the wrong way round. When a later block raises
the maximum, the old terms are multiplied up instead of down; with one block, or when the first
block holds every row's maximum, nothing changes and the answer is right.

Style: kept close to the online-softmax paper's two-line update.
"""
import math

import torch


def tiled_attention(query, key, value, block_size):
    scale = 1 / math.sqrt(query.shape[-1])
    m = torch.full(query.shape[:-1] + (1,), float("-inf"), dtype=query.dtype, device=query.device)
    d = torch.zeros_like(m)
    o = torch.zeros(query.shape[:-1] + (value.shape[-1],), dtype=query.dtype, device=query.device)
    for i in range(0, key.shape[-2], block_size):
        x = query @ key[..., i:i + block_size, :].transpose(-1, -2) * scale
        m_new = torch.maximum(m, x.amax(-1, keepdim=True))
        corr = torch.where(torch.isinf(m), torch.zeros_like(m), torch.exp(m_new - m))  # first block: no history
        e = torch.exp(x - m_new)
        d = d * corr + e.sum(-1, keepdim=True)
        o = o * corr + e @ value[..., i:i + block_size, :]
        m = m_new
    return o / d
