# expect: mask
# bug: never looks at attn_mask
import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    scores = query @ key.transpose(-2, -1) * scale  # (..., L, S)
    if is_causal:
        L, S = query.size(-2), key.size(-2)
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float('-inf'))
    return torch.softmax(scores, dim=-1) @ value

