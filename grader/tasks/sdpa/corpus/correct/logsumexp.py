"""Weights as exp(scores - logsumexp(scores))."""
import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    d = query.shape[-1]
    scores = query @ key.transpose(-2, -1) * (1 / math.sqrt(d) if scale is None else scale)
    if is_causal:
        i = torch.arange(scores.shape[-2]).unsqueeze(-1)
        j = torch.arange(scores.shape[-1]).unsqueeze(0)
        scores = scores.masked_fill(j > i, float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype is torch.bool else scores + attn_mask
    log_weights = scores - torch.logsumexp(scores, dim=-1, keepdim=True)
    return torch.exp(log_weights) @ value
