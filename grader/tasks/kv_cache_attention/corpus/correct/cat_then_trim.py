"""Caches rebuilt with torch.cat around row `position`, then trimmed to the filled rows.

Written for this project; the concatenating update is how Hugging Face's DynamicCache grows its
cache (transformers/cache_utils.py, Apache-2.0), here kept at a fixed length.
"""
import math

import torch


def kv_cache_attention(query, key, value, k_cache, v_cache, position):
    k_cache = torch.cat([k_cache[:, :position], key, k_cache[:, position + 1:]], dim=1)
    v_cache = torch.cat([v_cache[:, :position], value, v_cache[:, position + 1:]], dim=1)
    k, v = k_cache[:, :position + 1], v_cache[:, :position + 1]
    weights = torch.softmax(query @ k.transpose(1, 2) * (1.0 / math.sqrt(k.size(-1))), dim=-1)
    return weights @ v, k_cache, v_cache
