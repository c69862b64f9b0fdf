# expect: output
# cause: causal_mask_on_step
"""Applies the training-time causal mask again to the one query of the step.

Written for this project (the mask of the parallel forward, tril, reused at decoding time).
Bug: tril of the (1, n) score row keeps only the first key, so every step returns the first
token's value.
"""
import math

import torch


def kv_cache_attention(query, key, value, k_cache, v_cache, position):
    k_cache, v_cache = k_cache.clone(), v_cache.clone()
    k_cache[:, position] = key[:, 0]
    v_cache[:, position] = value[:, 0]
    k, v = k_cache[:, :position + 1], v_cache[:, :position + 1]
    scores = query @ k.transpose(1, 2) / math.sqrt(query.size(-1))        # (B, 1, n)
    causal = torch.ones(scores.shape[-2:], dtype=torch.bool).tril()       # (1, n): only key 0 kept
    scores = scores.masked_fill(~causal, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v, k_cache, v_cache
