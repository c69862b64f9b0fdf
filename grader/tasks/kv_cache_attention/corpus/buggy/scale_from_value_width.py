# expect: scale
# bug: scales by 1/sqrt of the values' width instead of the keys'
"""The head size read from the value cache: ``head_dim = v_cache.size(-1)``. Right whenever Dv = D.

Style: a clone-and-assign update, then a masked softmax over the full cache.
"""
import torch


def kv_cache_attention(query, key, value, k_cache, v_cache, position):
    head_dim = v_cache.size(-1)
    k_cache, v_cache = k_cache.clone(), v_cache.clone()
    k_cache[:, position:position + 1] = key
    v_cache[:, position:position + 1] = value
    scores = query @ k_cache.transpose(1, 2) / head_dim ** 0.5
    future = torch.arange(k_cache.size(1), device=query.device) > position
    scores = scores.masked_fill(future, float("-inf"))
    return scores.softmax(dim=-1) @ v_cache, k_cache, v_cache
