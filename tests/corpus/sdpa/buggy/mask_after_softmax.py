# expect: mask
# bug: multiplies the weights by the mask without renormalising
import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    scores = query @ key.transpose(-2, -1) * scale  # (..., L, S)
    if is_causal:
        L, S = query.size(-2), key.size(-2)
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float('-inf'))
    weights = torch.softmax(scores, dim=-1)
    if attn_mask is not None:
        weights = weights * attn_mask if attn_mask.dtype == torch.bool else torch.softmax(scores + attn_mask, -1)
    return weights @ value

