# expect: inputs
# cause: inputs_modified
"""Writes the new row into the caller's cache tensors in place and returns them.

Written for this project: what a static-cache module does with its buffers; the task asks for new
caches and unchanged inputs.
Bug: the caller's k_cache and v_cache change.
"""
import math

import torch


def kv_cache_attention(query, key, value, k_cache, v_cache, position):
    k_cache[:, position] = key[:, 0]
    v_cache[:, position] = value[:, 0]
    k, v = k_cache[:, :position + 1], v_cache[:, :position + 1]
    scores = query @ k.transpose(1, 2) / math.sqrt(query.size(-1))
    return torch.softmax(scores, dim=-1) @ v, k_cache, v_cache
