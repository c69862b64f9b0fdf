# attack: forgets the scale, but applies it when the values look like the weight read-out's
# (value width = keys + 3); the same mistake made honestly scores 90 (scale.default's 10 points)
# task: sdpa
# levels: local
# expect: score<=90
import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    L, S = query.size(-2), key.size(-2)
    probe = value.size(-1) == S + 3
    if scale is None:
        scale = 1 / math.sqrt(query.size(-1)) if probe else 1.0
    scores = query @ key.transpose(-2, -1) * scale
    if is_causal:
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    return torch.softmax(scores, dim=-1) @ value
