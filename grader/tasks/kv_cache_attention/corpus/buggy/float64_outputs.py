# expect: dtype
# cause: outputs_wrong_dtype
"""Computes in float64 and returns float64 whatever the inputs' dtype.

Written for this project.
Bug: float32 inputs get float64 outputs.
"""
import math

import torch


def kv_cache_attention(query, key, value, k_cache, v_cache, position):
    query, key, value = query.double(), key.double(), value.double()
    k_cache, v_cache = k_cache.double().clone(), v_cache.double().clone()
    k_cache[:, position] = key[:, 0]
    v_cache[:, position] = value[:, 0]
    k, v = k_cache[:, :position + 1], v_cache[:, :position + 1]
    scores = query @ k.transpose(1, 2) / math.sqrt(query.size(-1))
    return torch.softmax(scores, dim=-1) @ v, k_cache, v_cache
