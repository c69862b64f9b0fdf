# expect: output
# cause: softmax_queries
"""The softmax taken over the query axis (dim=1), which has a single entry at decoding time.

Written for this project (dim=1 of a (B, L, S) score tensor during training is the query axis too).
Bug: every weight is 1, so the output is the sum of the cached values.
"""
import math

import torch


def kv_cache_attention(query, key, value, k_cache, v_cache, position):
    k_cache, v_cache = k_cache.clone(), v_cache.clone()
    k_cache[:, position] = key[:, 0]
    v_cache[:, position] = value[:, 0]
    k, v = k_cache[:, :position + 1], v_cache[:, :position + 1]
    scores = query @ k.transpose(1, 2) / math.sqrt(query.size(-1))
    return torch.softmax(scores, dim=1) @ v, k_cache, v_cache
