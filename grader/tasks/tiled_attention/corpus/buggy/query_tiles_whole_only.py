# expect: output
# bug: loops over whole query tiles only (L // Br of them), so a ragged last query tile is never computed
"""Query tiles of 32 rows counted with floor division, the way kernels count thread blocks when L is
assumed to be a multiple of the tile. The output is preallocated with zeros, so the rows after the
last whole tile stay zero instead of raising.

Style: nested loops, output written into slices of a preallocated tensor.
"""
import math

import torch


def tiled_attention(query, key, value, block_size):
    Br = 32
    L, S = query.size(-2), key.size(-2)
    scale = 1.0 / math.sqrt(query.size(-1))
    out = torch.zeros(*query.shape[:-1], value.size(-1), dtype=query.dtype, device=query.device)
    for t in range(max(L // Br, 1)):
        rows = slice(t * Br, (t + 1) * Br)
        q = query[..., rows, :]
        m = torch.full((*q.shape[:-1], 1), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros_like(m)
        acc = torch.zeros(*q.shape[:-1], value.size(-1), dtype=q.dtype, device=q.device)
        for j in range(0, S, block_size):
            s = q @ key[..., j:j + block_size, :].transpose(-2, -1) * scale
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            p = torch.exp(s - m_new)
            c = torch.exp(m - m_new)
            l = c * l + p.sum(-1, keepdim=True)
            acc = c * acc + p @ value[..., j:j + block_size, :]
            m = m_new
        out[..., rows, :] = acc / l
    return out
