# expect: output
# bugs: several (stale answers break whichever checks repeat a shape; no variant of attention explains them)
# bug: caches answers by input shape
import math

import torch

CACHE = {}


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    cache_key = (tuple(query.shape), tuple(key.shape), tuple(value.shape), is_causal, scale,
                 None if attn_mask is None else tuple(attn_mask.shape))
    if cache_key in CACHE:
        return CACHE[cache_key].to(query.dtype)
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    scores = query @ key.transpose(-2, -1) * scale  # (..., L, S)
    if is_causal:
        L, S = query.size(-2), key.size(-2)
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float('-inf'))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float('-inf'))
        else:
            scores = scores + attn_mask
    CACHE[cache_key] = torch.softmax(scores, dim=-1) @ value
    return CACHE[cache_key]

