# expect: causal
"""x-transformers' own causal convention (bottom-right), which this task's contract does not use."""
import torch
from torch import einsum


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    scale = scale if scale is not None else query.shape[-1] ** -0.5
    dots = einsum('... i d, ... j d -> ... i j', query, key) * scale
    i, j = dots.shape[-2:]
    mask_value = -torch.finfo(dots.dtype).max
    if attn_mask is not None:
        dots = dots.masked_fill(~attn_mask, mask_value) if attn_mask.dtype == torch.bool else dots + attn_mask
    if is_causal:
        dots = dots.masked_fill(torch.ones((i, j), dtype=torch.bool).triu(j - i + 1), mask_value)
    return einsum('... i j, ... j d -> ... i d', dots.softmax(dim=-1), value)
