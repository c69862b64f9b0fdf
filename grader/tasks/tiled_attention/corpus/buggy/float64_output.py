# expect: dtype
import math

import torch


def tiled_attention(query, key, value, block_size):
    scale = 1 / math.sqrt(query.size(-1))
    m = torch.full(query.shape[:-1] + (1,), float("-inf"), dtype=query.dtype)
    l = torch.zeros_like(m)
    acc = torch.zeros(query.shape[:-1] + (value.size(-1),), dtype=query.dtype)
    for start in range(0, key.size(-2), block_size):
        k = key[..., start:start + block_size, :]
        v = value[..., start:start + block_size, :]
        s = query @ k.transpose(-2, -1) * scale
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        p = torch.exp(s - m_new)
        correction = torch.exp(m - m_new)
        l = l * correction + p.sum(dim=-1, keepdim=True)
        acc = acc * correction + p @ v
        m = m_new
    return (acc / l).double()
