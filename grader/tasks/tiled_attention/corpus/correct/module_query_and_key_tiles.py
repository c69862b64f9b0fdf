"""FlashAttention-1's forward as a tutorial nn.Module: query tiles of Br rows (outer loop), key tiles
of block_size rows (inner loop), running statistics per query tile.

Style: pseudo-code names (Br, Bc, m_i, l_i, O_i), ``self.proj = nn.Identity()`` as the usual
placeholder, the tiles cut with slices so the last ones may be short.
"""
import math

import torch
from torch import nn


class FlashForward(nn.Module):
    def __init__(self, block_size, query_block=32):
        super().__init__()
        self.Bc, self.Br = block_size, query_block
        self.proj = nn.Identity()

    def forward(self, Q, K, V):
        L, S = Q.shape[-2], K.shape[-2]
        softmax_scale = 1.0 / math.sqrt(Q.shape[-1])
        out_tiles = []
        for i in range(0, L, self.Br):
            Q_i = Q[..., i:i + self.Br, :] * softmax_scale
            m_i = torch.full(Q_i.shape[:-1] + (1,), -math.inf, dtype=Q.dtype, device=Q.device)
            l_i = torch.zeros_like(m_i)
            O_i = torch.zeros(*Q_i.shape[:-1], V.shape[-1], dtype=Q.dtype, device=Q.device)
            for j in range(0, S, self.Bc):
                S_ij = Q_i @ K[..., j:j + self.Bc, :].transpose(-1, -2)
                m_new = torch.maximum(m_i, S_ij.max(dim=-1, keepdim=True).values)
                P_ij = torch.exp(S_ij - m_new)
                alpha = torch.exp(m_i - m_new)
                l_i = alpha * l_i + P_ij.sum(dim=-1, keepdim=True)
                O_i = alpha * O_i + P_ij @ V[..., j:j + self.Bc, :]
                m_i = m_new
            out_tiles.append(O_i / l_i)
        return self.proj(torch.cat(out_tiles, dim=-2))


def tiled_attention(query, key, value, block_size):
    return FlashForward(block_size)(query, key, value)
