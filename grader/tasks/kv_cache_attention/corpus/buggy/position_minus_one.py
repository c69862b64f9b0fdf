# expect: cache
# cause: position_off_by_one
"""Writes the new token at position - 1, over the last cached one.

Written for this project (a 1-based position taken for a 0-based row).
Bug: row position - 1 is overwritten and the step attends over rows 0..position - 1 only.
"""
import math

import torch


def kv_cache_attention(query, key, value, k_cache, v_cache, position):
    at = position - 1
    k_cache, v_cache = k_cache.clone(), v_cache.clone()
    k_cache[:, at] = key[:, 0]
    v_cache[:, at] = value[:, 0]
    k, v = k_cache[:, :position], v_cache[:, :position]
    scores = query @ k.transpose(1, 2) / math.sqrt(query.size(-1))
    return torch.softmax(scores, dim=-1) @ v, k_cache, v_cache
