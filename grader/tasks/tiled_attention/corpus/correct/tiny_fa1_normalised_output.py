"""FlashAttention-1's loop order: key blocks outside, query blocks inside, the output kept normalised.

Source: ``flash_attn_v1`` of https://github.com/66RING/tiny-flash-attention
(flash_attention-py/tiny_flash_attn.py; MIT licence). Adapted, not copied: the task's signature
and batch dimensions; the block counts are rounded up (the original's ``k.shape[-2] // BLOCK_M``
drops a partial block: see buggy/tiny_fa2_floor_division.py); the buffers take the inputs' dtype
instead of the default float32; the scores are scaled.
Why correct: after every key block each query block's output is the normalised attention over
the keys seen so far, o = (l_old · e^(m_old − m_new) · o + e^(m_blk − m_new) · p_blk V) / l_new,
which is the paper's Algorithm 1 (line 12); after the last block it is the full attention.
"""
import math

import torch


def tiled_attention(query, key, value, block_size):
    L, S = query.shape[-2], key.shape[-2]
    scale = 1 / math.sqrt(query.shape[-1])
    out = torch.zeros(query.shape[:-1] + (value.shape[-1],), dtype=query.dtype)
    l = torch.zeros(query.shape[:-1] + (1,), dtype=query.dtype)
    m = torch.full(query.shape[:-1] + (1,), -torch.inf, dtype=query.dtype)
    q_blocks = torch.split(query, block_size, dim=-2)
    o_blocks = list(torch.split(out, block_size, dim=-2))
    l_blocks = list(torch.split(l, block_size, dim=-2))
    m_blocks = list(torch.split(m, block_size, dim=-2))
    for j in range(math.ceil(S / block_size)):
        kj = key[..., j * block_size:(j + 1) * block_size, :]
        vj = value[..., j * block_size:(j + 1) * block_size, :]
        for i in range(math.ceil(L / block_size)):
            old_o, old_d, old_m = o_blocks[i], l_blocks[i], m_blocks[i]
            x_qkt = q_blocks[i] @ kj.transpose(-2, -1) * scale
            local_m = x_qkt.max(dim=-1, keepdim=True).values
            safe_e = torch.exp(x_qkt - local_m)
            curr_d = safe_e.sum(dim=-1, keepdim=True)
            new_m = torch.maximum(local_m, old_m)
            new_d = old_d * torch.exp(old_m - new_m) + curr_d * torch.exp(local_m - new_m)
            new_o = old_d * torch.exp(old_m - new_m) * old_o / new_d + \
                (torch.exp(local_m - new_m) * safe_e / new_d) @ vj
            l_blocks[i], m_blocks[i], o_blocks[i] = new_d, new_m, new_o
    return torch.cat(o_blocks, dim=-2)
