"""The textbook step: copy the caches, write row `position`, attend over the filled rows.

Written for this project (the pattern of nanoGPT-style decoders with a preallocated cache).
"""
import math

import torch


def kv_cache_attention(query, key, value, k_cache, v_cache, position):
    k_cache, v_cache = k_cache.clone(), v_cache.clone()
    k_cache[:, position] = key[:, 0]
    v_cache[:, position] = value[:, 0]
    keys, values = k_cache[:, :position + 1], v_cache[:, :position + 1]   # (B, n, D), (B, n, Dv)
    scores = query @ keys.transpose(-2, -1) / math.sqrt(query.size(-1))   # (B, 1, n)
    return torch.softmax(scores, dim=-1) @ values, k_cache, v_cache
