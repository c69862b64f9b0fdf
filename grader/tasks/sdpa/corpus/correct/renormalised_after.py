"""Masks after the exponent and renormalises: mathematically the same as masking before the softmax."""
import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None, **unused):
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    scores = query @ key.transpose(-2, -1) * scale
    if attn_mask is not None and attn_mask.dtype != torch.bool:
        scores = scores + attn_mask
        attn_mask = None
    if is_causal:
        attn_mask = torch.ones(scores.shape[-2:], dtype=torch.bool).tril()
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf"))  # keeps the max finite per row
    e = torch.exp(scores - scores.amax(-1, keepdim=True))
    if attn_mask is not None:
        e = e * attn_mask
    return (e / e.sum(-1, keepdim=True)) @ value
