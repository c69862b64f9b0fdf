"""index_copy for the write, and a mask over the whole cache instead of a slice (padded rows -inf).

Written for this project, after the masked decoding of gpt-fast's model.py (pytorch-labs/gpt-fast,
BSD-3-Clause), which attends over the whole preallocated cache and masks the unfilled positions.
"""
import math

import torch


def kv_cache_attention(query, key, value, k_cache, v_cache, position):
    where = torch.tensor([position])
    k_cache = k_cache.index_copy(1, where, key)
    v_cache = v_cache.index_copy(1, where, value)
    scores = torch.einsum("bqd,bnd->bqn", query, k_cache) / math.sqrt(query.shape[-1])
    filled = torch.arange(k_cache.size(1)) <= position           # (N,): rows 0..position
    scores = scores.masked_fill(~filled, float("-inf"))
    return torch.einsum("bqn,bnd->bqd", scores.softmax(-1), v_cache), k_cache, v_cache
