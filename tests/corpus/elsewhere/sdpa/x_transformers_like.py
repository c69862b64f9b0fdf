"""x-transformers flavour: einsum with named axes, max_neg_value = -finfo.max, mask then softmax.

(x-transformers itself aligns its causal mask bottom-right; this task's contract is top-left.)
"""
import torch
from torch import einsum


def max_neg_value(t):
    return -torch.finfo(t.dtype).max


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    scale = scale if scale is not None else query.shape[-1] ** -0.5
    dots = einsum('... i d, ... j d -> ... i j', query, key) * scale
    i, j = dots.shape[-2:]
    if attn_mask is not None and attn_mask.dtype != torch.bool:
        dots = dots + attn_mask
    elif attn_mask is not None:
        dots = dots.masked_fill(~attn_mask, max_neg_value(dots))
    if is_causal:
        causal_mask = torch.ones((i, j), dtype=torch.bool, device=dots.device).triu(1)
        dots = dots.masked_fill(causal_mask, max_neg_value(dots))
    attn = dots.softmax(dim=-1)
    return einsum('... i j, ... j d -> ... i d', attn, value)
