# expect: weights
# bug: scales the weights after the softmax
import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    factor = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    scores = query @ key.transpose(-2, -1)
    if is_causal:
        L, S = query.size(-2), key.size(-2)
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float('-inf'))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float('-inf'))
        else:
            scores = scores + attn_mask
    return (torch.softmax(scores, dim=-1) * factor) @ value

