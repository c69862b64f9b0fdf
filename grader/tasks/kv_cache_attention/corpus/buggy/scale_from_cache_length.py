# expect: scale
# cause: scale_from_cache_length
"""Scales the scores by 1/sqrt(number of cached keys) instead of 1/sqrt(D).

Written for this project (k.size(1) taken for k.size(-1)).
Bug: the scale follows the cache's fill level, so it changes at every step.
"""
import math

import torch


def kv_cache_attention(query, key, value, k_cache, v_cache, position):
    k_cache, v_cache = k_cache.clone(), v_cache.clone()
    k_cache[:, position] = key[:, 0]
    v_cache[:, position] = value[:, 0]
    k, v = k_cache[:, :position + 1], v_cache[:, :position + 1]
    scores = query @ k.transpose(1, 2) / math.sqrt(k.size(1))
    return torch.softmax(scores, dim=-1) @ v, k_cache, v_cache
