"""Upcasts only where precision matters: scores and softmax in float64 (softmax's dtype=), back at the end."""
import torch
import torch.nn.functional as F


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    E = query.size(-1)
    factor = E ** -0.5 if scale is None else scale
    scores = torch.matmul(query.to(torch.float64), key.to(torch.float64).transpose(-2, -1)).mul(factor)
    L, S = scores.shape[-2:]
    if is_causal:
        scores = scores.masked_fill(torch.ones(L, S, dtype=torch.bool).tril().logical_not(), float("-inf"))
    if attn_mask is not None:
        scores = (scores.masked_fill(attn_mask.logical_not(), float("-inf")) if attn_mask.dtype == torch.bool
                  else scores.add(attn_mask.to(torch.float64)))
    weights = F.softmax(scores, dim=-1, dtype=torch.float64)
    return torch.matmul(weights, value.to(torch.float64)).to(query.dtype)
