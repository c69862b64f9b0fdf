"""FlashAttention's Algorithm 1 step by step: running statistics for every query row kept in full.

Source: https://github.com/wangshankun/OpProfiling (FlashAttention/flash_attention_v1.py; no
licence file), a script that follows the paper's Algorithm 1 line by line (comments in Chinese).
Adapted, not copied: the task's signature and batch dimensions; its fixed Br = Bc = 4 (sizes it
says stand for ones computed from the SRAM) become ``block_size``; the two sequence lengths are
kept apart (the original has one N); the scores are scaled; the row maximum of the old and the
new block is taken with torch.maximum instead of max over a column_stack.
Why correct: m, l and O live in full-size buffers; for each key block and each query block the
block's own maximum and exp-sum are merged into them and the stored output is rescaled by
l_old · e^(m_old − m_new) / l_new before the new block's share is added: the paper's lines 9-13.
"""
import math

import torch


def tiled_attention(query, key, value, block_size):
    L, S = query.shape[-2], key.shape[-2]
    scale = 1 / math.sqrt(query.shape[-1])
    O = torch.zeros(query.shape[:-1] + (value.shape[-1],), dtype=query.dtype)
    l = torch.zeros(query.shape[:-1] + (1,), dtype=query.dtype)
    m = torch.full(query.shape[:-1] + (1,), -torch.inf, dtype=query.dtype)
    Br = Bc = block_size
    for block_start_Bc in range(0, S, Bc):
        Kj = key[..., block_start_Bc:block_start_Bc + Bc, :]
        Vj = value[..., block_start_Bc:block_start_Bc + Bc, :]
        for block_start_Br in range(0, L, Br):
            rows = slice(block_start_Br, block_start_Br + Br)
            mi, li, Oi = m[..., rows, :], l[..., rows, :], O[..., rows, :]
            Sij = query[..., rows, :] @ Kj.transpose(-2, -1) * scale
            mij_hat = Sij.max(dim=-1).values[..., None]
            pij_hat = torch.exp(Sij - mij_hat)
            lij_hat = pij_hat.sum(dim=-1)[..., None]
            mi_new = torch.maximum(mi, mij_hat)
            li_new = torch.exp(mi - mi_new) * li + torch.exp(mij_hat - mi_new) * lij_hat
            Oi = (li * torch.exp(mi - mi_new) * Oi / li_new) + (torch.exp(mij_hat - mi_new) * pij_hat / li_new) @ Vj
            m[..., rows, :] = mi_new
            l[..., rows, :] = li_new
            O[..., rows, :] = Oi
    return O
