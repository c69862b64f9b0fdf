# expect: output
# bugs: several (half-precision rounding shows in every check that compares values, and no family tests precision alone)
# bug: computes the scores and the weighted sum in float16, then casts back to the input's dtype
import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    L, S = query.size(-2), key.size(-2)
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    q, k, v = query.half(), key.half(), value.half()
    scores = (q @ k.transpose(-2, -1)).float() * scale  # (..., L, S)
    if is_causal:
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    return (torch.softmax(scores, dim=-1).half() @ v).to(query.dtype)
