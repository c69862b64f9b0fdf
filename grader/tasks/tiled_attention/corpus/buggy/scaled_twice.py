# expect: output
# bug: scales the queries and then the scores again (1/E instead of 1/sqrt(E))
"""Two conventions mixed: the queries are pre-scaled once before the loop (as kernels do to save a
multiply per score), and the per-block scores are scaled again as in the textbook formula.

Style: torch.split over the keys and values together.
"""
import math

import torch


def tiled_attention(query, key, value, block_size):
    d = query.shape[-1]
    q = query / math.sqrt(d)
    m = torch.full((*query.shape[:-1], 1), -torch.inf, dtype=query.dtype, device=query.device)
    l = torch.zeros_like(m)
    o = torch.zeros((*query.shape[:-1], value.shape[-1]), dtype=query.dtype, device=query.device)
    for k_blk, v_blk in zip(torch.split(key, block_size, -2), torch.split(value, block_size, -2)):
        s = q @ k_blk.transpose(-2, -1) / math.sqrt(d)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        p = torch.exp(s - m_new)
        alpha = torch.exp(m - m_new)
        l = alpha * l + p.sum(-1, keepdim=True)
        o = alpha * o + p @ v_blk
        m = m_new
    return o / l
