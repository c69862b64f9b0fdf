# expect: output
"""FlashAttention-2's loops where one length N, the query's, counts the key blocks too.

Source: https://github.com/wangshankun/OpProfiling (FlashAttention/flash_attention_v2.py; no
licence file), a step-by-step script of the paper's Algorithm 1 for self-attention, where Q, K
and V share one N and both loops run ``range(0, N, B)``. Adapted, not copied: the task's
signature and batch dimensions; Br = Bc = ``block_size`` (4 in the original); N is taken from
the queries, as a self-attention script carried over to cross-attention does; the scores are
scaled; the block buffers take each block's own size.
Bug: the key loop stops at the query length rounded up to a block: with more keys than queries
the keys past it are never read and get no weight.
"""
import math

import torch


def tiled_attention(query, key, value, block_size):
    N, d = query.shape[-2], query.shape[-1]
    Br = Bc = block_size
    O = torch.zeros(query.shape[:-1] + (value.shape[-1],), dtype=query.dtype)
    for block_start_Br in range(0, N, Br):
        Qi = query[..., block_start_Br:block_start_Br + Br, :] / math.sqrt(d)
        Oi = torch.zeros(Qi.shape[:-1] + (value.shape[-1],), dtype=query.dtype)
        li = torch.zeros(Qi.shape[:-1] + (1,), dtype=query.dtype)
        mi = torch.full(Qi.shape[:-1] + (1,), -torch.inf, dtype=query.dtype)
        for block_start_Bc in range(0, N, Bc):
            Kj = key[..., block_start_Bc:block_start_Bc + Bc, :]
            Vj = value[..., block_start_Bc:block_start_Bc + Bc, :]
            if Kj.shape[-2] == 0:
                break
            Sij = Qi @ Kj.transpose(-2, -1)
            mi_new = torch.maximum(mi, torch.max(Sij, dim=-1).values[..., None])
            Pij_hat = torch.exp(Sij - mi_new)
            li = li * torch.exp(mi - mi_new) + torch.sum(Pij_hat, dim=-1)[..., None]
            Oi = Oi * torch.exp(mi - mi_new) + Pij_hat @ Vj
            mi = mi_new
        O[..., block_start_Br:block_start_Br + Br, :] = Oi / li
    return O
