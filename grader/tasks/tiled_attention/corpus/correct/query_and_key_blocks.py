"""FlashAttention's two loops: query blocks outside, key blocks inside."""
import math

import torch


def tiled_attention(query, key, value, block_size):
    L, S = query.size(-2), key.size(-2)
    scale = 1.0 / math.sqrt(query.size(-1))
    out = torch.empty(query.shape[:-1] + (value.size(-1),), dtype=query.dtype)
    for qs in range(0, L, block_size):
        q = query[..., qs:qs + block_size, :] * scale
        m = torch.full(q.shape[:-1] + (1,), -math.inf, dtype=query.dtype)
        l = torch.zeros_like(m)
        acc = torch.zeros(q.shape[:-1] + (value.size(-1),), dtype=query.dtype)
        for ks in range(0, S, block_size):
            s = q @ key[..., ks:ks + block_size, :].transpose(-1, -2)
            m_new = torch.max(m, s.max(dim=-1, keepdim=True).values)
            alpha = torch.exp(m - m_new)
            p = torch.exp(s - m_new)
            l = alpha * l + p.sum(-1, keepdim=True)
            acc = alpha * acc + p @ value[..., ks:ks + block_size, :]
            m = m_new
        out[..., qs:qs + block_size, :] = acc / l
    return out
