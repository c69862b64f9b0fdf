# expect: cache
# cause: position_off_by_one
"""Writes the new token one row too far (position + 1), as if position were the last filled row.

Written for this project (the offset convention mixed up: "index of the last token" against
"number of tokens cached").
Bug: the key and value go to row position + 1 and the step attends over rows 0..position + 1,
one padded row included.
"""
import math

import torch


def kv_cache_attention(query, key, value, k_cache, v_cache, position):
    at = position + 1
    k_cache, v_cache = k_cache.clone(), v_cache.clone()
    k_cache[:, at] = key[:, 0]
    v_cache[:, at] = value[:, 0]
    k, v = k_cache[:, :at + 1], v_cache[:, :at + 1]
    scores = query @ k.transpose(1, 2) / math.sqrt(query.size(-1))
    return torch.softmax(scores, dim=-1) @ v, k_cache, v_cache
