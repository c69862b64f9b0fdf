"""FlashAttention-1 style tiling in plain torch: query tiles x key tiles, running max and sum."""
import math

import torch

Q_TILE, K_TILE = 3, 5


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    L, S, Ev = query.shape[-2], key.shape[-2], value.shape[-1]
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    if is_causal:
        attn_mask = torch.ones(L, S, dtype=torch.bool).tril()
    bias = None
    if attn_mask is not None:
        bias = (torch.zeros(attn_mask.shape, dtype=query.dtype).masked_fill(~attn_mask, -math.inf)
                if attn_mask.dtype == torch.bool else attn_mask)
        bias = bias.expand(*batch, L, S)
    out_tiles = []
    for qs in range(0, L, Q_TILE):
        q = query[..., qs:qs + Q_TILE, :]
        m = torch.full((*batch, q.shape[-2], 1), -math.inf, dtype=query.dtype)
        l = torch.zeros((*batch, q.shape[-2], 1), dtype=query.dtype)
        o = torch.zeros((*batch, q.shape[-2], Ev), dtype=query.dtype)
        for ks in range(0, S, K_TILE):
            s = q @ key[..., ks:ks + K_TILE, :].transpose(-1, -2) * scale
            if bias is not None:
                s = s + bias[..., qs:qs + Q_TILE, ks:ks + K_TILE]
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
            m_safe = torch.where(m_new == -math.inf, torch.zeros_like(m_new), m_new)
            p = torch.exp(s - m_safe)
            alpha = torch.exp(m - m_safe)
            l = alpha * l + p.sum(dim=-1, keepdim=True)
            o = alpha * o + p @ value[..., ks:ks + K_TILE, :]
            m = m_new
        out_tiles.append(o / l)
    return torch.cat(out_tiles, dim=-2)
