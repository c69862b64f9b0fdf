# expect: padding
# cause: cache_not_trimmed
"""Attends over the whole preallocated cache: the padded rows after position get weight too.

Written for this project (a static cache used without its fill level).
Bug: no slice and no mask: the scores cover all N rows.
"""
import math

import torch


def kv_cache_attention(query, key, value, k_cache, v_cache, position):
    k_cache, v_cache = k_cache.clone(), v_cache.clone()
    k_cache[:, position] = key[:, 0]
    v_cache[:, position] = value[:, 0]
    scores = query @ k_cache.transpose(1, 2) / math.sqrt(query.size(-1))
    return torch.softmax(scores, dim=-1) @ v_cache, k_cache, v_cache
