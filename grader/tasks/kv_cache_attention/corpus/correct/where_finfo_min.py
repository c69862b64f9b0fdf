"""torch.where for the write and an additive mask of finfo.min over the padded rows.

Written for this project, in the style of Hugging Face decoders' additive masks (finfo(dtype).min).
"""
import math

import torch


def kv_cache_attention(query, key, value, k_cache, v_cache, position):
    N = k_cache.size(1)
    row = (torch.arange(N) == position)[None, :, None]             # (1, N, 1)
    k_cache = torch.where(row, key, k_cache)
    v_cache = torch.where(row, value, v_cache)
    bias = torch.zeros(N, dtype=query.dtype).masked_fill(torch.arange(N) > position, torch.finfo(query.dtype).min)
    scores = query @ k_cache.transpose(-1, -2) / math.sqrt(query.size(-1)) + bias
    scores = scores - scores.amax(dim=-1, keepdim=True)
    weights = scores.exp()
    return (weights / weights.sum(-1, keepdim=True)) @ v_cache, k_cache, v_cache
