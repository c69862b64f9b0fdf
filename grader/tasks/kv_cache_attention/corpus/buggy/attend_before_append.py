# expect: cache
# cause: attend_before_append
"""Attends over the cache before the new key and value are appended: the step misses its own token.

Written for this project (an off-by-one seen in hand-written decoding loops).
Bug: the scores are taken over rows 0..position-1 of the incoming cache; the new row is written
only afterwards, so the first step attends to nothing and every later one misses itself.
"""
import math

import torch


def kv_cache_attention(query, key, value, k_cache, v_cache, position):
    scores = query @ k_cache[:, :position].transpose(1, 2) / math.sqrt(query.size(-1))
    output = torch.softmax(scores, dim=-1) @ v_cache[:, :position]
    k_cache, v_cache = k_cache.clone(), v_cache.clone()
    k_cache[:, position] = key[:, 0]
    v_cache[:, position] = value[:, 0]
    return output, k_cache, v_cache
