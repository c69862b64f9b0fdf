# expect: forbidden
"""torch's built-in attention over the cache.

Written for this project.
Bug: F.scaled_dot_product_attention is not allowed.
"""
import torch
import torch.nn.functional as F


def kv_cache_attention(query, key, value, k_cache, v_cache, position):
    k_cache, v_cache = k_cache.clone(), v_cache.clone()
    k_cache[:, position] = key[:, 0]
    v_cache[:, position] = value[:, 0]
    out = F.scaled_dot_product_attention(query, k_cache[:, :position + 1], v_cache[:, :position + 1])
    return out, k_cache, v_cache
