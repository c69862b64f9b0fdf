# attack: computes in float16 inside and casts back, so its one mistake (half precision) shows in many
# checks; it must be charged wherever it shows, and the same under every seed
# task: sdpa
# levels: local
# expect: score<=50
import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    L, S = query.size(-2), key.size(-2)
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    q, k, v = query.half(), key.half(), value.half()
    scores = (q @ k.transpose(-2, -1)).float() * scale
    if is_causal:
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    return (torch.softmax(scores, dim=-1).half() @ v).to(query.dtype)
