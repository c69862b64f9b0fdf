"""No matmul at all: one query row at a time, dot products by elementwise multiply and sum."""
import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    L, S = query.shape[-2], key.shape[-2]
    c = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    outputs = []
    for i in range(L):
        qi = query[..., i, :].unsqueeze(-2)            # (..., 1, E)
        logits = (qi * key).sum(dim=-1) * c           # (..., S)
        if is_causal:
            logits = logits.masked_fill(torch.arange(S) > i, -math.inf)
        if attn_mask is not None:
            row = attn_mask[..., i, :] if attn_mask.shape[-2] > 1 else attn_mask[..., 0, :]
            logits = logits.masked_fill(~row, -math.inf) if row.dtype == torch.bool else logits + row
        w = torch.softmax(logits, dim=-1).unsqueeze(-1)  # (..., S, 1)
        outputs.append((w * value).sum(dim=-2))          # (..., Ev)
    return torch.stack(outputs, dim=-2)
