"""The attention inside nanoGPT's CausalSelfAttention, lifted into the task's function."""
import math

import torch
from torch.nn import functional as F


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    T, S = query.size(-2), key.size(-2)
    att = (query @ key.transpose(-2, -1)) * (scale if scale is not None else 1.0 / math.sqrt(key.size(-1)))
    if is_causal:
        bias = torch.tril(torch.ones(T, S, device=query.device))
        att = att.masked_fill(bias == 0, float('-inf'))
    if attn_mask is not None:
        att = att.masked_fill(attn_mask == 0, float('-inf')) if attn_mask.dtype == torch.bool else att + attn_mask
    att = F.softmax(att, dim=-1)
    y = att @ value  # (..., T, S) x (..., S, hs) -> (..., T, hs)
    return y
