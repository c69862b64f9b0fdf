"""One query row at a time (slow but correct)."""
import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    L, S = query.size(-2), key.size(-2)
    scale = scale if scale is not None else 1.0 / math.sqrt(query.size(-1))
    rows = []
    for i in range(L):
        s = (query[..., i:i + 1, :] @ key.transpose(-1, -2)) * scale  # (..., 1, S)
        if is_causal:
            hide = torch.arange(S) > i
            s = s.masked_fill(hide, float("-inf"))
        if attn_mask is not None:
            m = attn_mask[..., i:i + 1, :] if attn_mask.size(-2) == L else attn_mask
            s = s.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else s + m
        rows.append(torch.softmax(s, dim=-1) @ value)  # (..., 1, Ev)
    return torch.cat(rows, dim=-2)
