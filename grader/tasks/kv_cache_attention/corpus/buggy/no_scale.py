# expect: scale
# cause: no_scale
"""No 1/sqrt(D) at all.

Written for this project.
Bug: softmax(q k^T) instead of softmax(q k^T / sqrt(D)).
"""
import torch


def kv_cache_attention(query, key, value, k_cache, v_cache, position):
    k_cache, v_cache = k_cache.clone(), v_cache.clone()
    k_cache[:, position] = key[:, 0]
    v_cache[:, position] = value[:, 0]
    k, v = k_cache[:, :position + 1], v_cache[:, :position + 1]
    return torch.softmax(query @ k.transpose(1, 2), dim=-1) @ v, k_cache, v_cache
