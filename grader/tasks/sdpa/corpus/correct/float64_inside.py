"""Computes in float64 and casts the result back to the input dtype."""
import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    dtype = query.dtype
    q, k, v = query.double(), key.double(), value.double()
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale
    if is_causal:
        L, S = scores.shape[-2:]
        scores = scores.masked_fill(torch.triu(torch.ones(L, S, dtype=torch.bool), 1), -math.inf)
    if attn_mask is not None:
        scores = scores.masked_fill(attn_mask.logical_not(), -math.inf) if attn_mask.dtype == torch.bool \
            else scores + attn_mask.double()
    return torch.matmul(torch.softmax(scores, -1), v).to(dtype)
