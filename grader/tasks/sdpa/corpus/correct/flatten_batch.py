"""Broadcasts the batch dims, flattens them into one, uses bmm, and restores the shape."""
import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    L, E = query.shape[-2:]
    S, Ev = value.shape[-2:]
    q = query.expand(*batch, L, E).reshape(-1, L, E)
    k = key.expand(*batch, S, E).reshape(-1, S, E)
    v = value.expand(*batch, S, Ev).reshape(-1, S, Ev)
    alpha = scale if scale is not None else 1.0 / math.sqrt(E)
    scores = torch.baddbmm(torch.zeros(q.size(0), L, S, dtype=q.dtype), q, k.transpose(1, 2), beta=0.0, alpha=alpha)
    if is_causal:
        attn_mask = torch.ones(L, S, dtype=torch.bool).tril()
    if attn_mask is not None:
        m = attn_mask.expand(*batch, L, S).reshape(-1, L, S)
        scores = scores.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else scores + m
    out = torch.bmm(torch.softmax(scores, dim=2), v)
    return out.reshape(*batch, L, Ev)
