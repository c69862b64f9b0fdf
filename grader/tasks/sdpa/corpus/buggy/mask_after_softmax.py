# expect: mask
# bug: multiplies the weights by the mask, and by the causal triangle, after the softmax without renormalising
import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    scores = query @ key.transpose(-2, -1) * scale  # (..., L, S)
    if attn_mask is not None and attn_mask.dtype != torch.bool:
        scores = scores + attn_mask
    weights = torch.softmax(scores, dim=-1)
    if is_causal:
        L, S = query.size(-2), key.size(-2)
        weights = weights * torch.ones(L, S).tril()
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        weights = weights * attn_mask
    return weights @ value
