# expect: dtype
# bugs: several (the float32 weights make every float64 call raise; the checks that call in float64 are charged, since they could not check)
"""Inference-engine habit: the softmax computed in float32 (F.softmax(..., dtype=torch.float32)) and
multiplied by the cached values without casting back. Fine for float32 and float16 inputs; float64
values make the product raise a dtype error.
"""
import math

import torch
import torch.nn.functional as F


def kv_cache_attention(query, key, value, k_cache, v_cache, position):
    k_cache = k_cache.clone()
    v_cache = v_cache.clone()
    k_cache[:, position] = key.squeeze(1)
    v_cache[:, position] = value.squeeze(1)
    k, v = k_cache[:, :position + 1], v_cache[:, :position + 1]
    weights = F.softmax(query @ k.transpose(1, 2) / math.sqrt(k.size(-1)), dim=-1, dtype=torch.float32)
    return weights @ v, k_cache, v_cache
