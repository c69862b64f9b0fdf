# expect: cache
# bug: attends with the new key and value but returns the caches it was given (the new row is never stored)
"""The step's keys and values assembled with torch.cat for the attention only; the function then
returns the caches it received, so the next step will not see this token.

Style: concatenation of the filled rows and the new token, no preallocated writes.
"""
import math

import torch


def kv_cache_attention(query, key, value, k_cache, v_cache, position):
    keys = torch.cat([k_cache[:, :position], key], dim=1)
    values = torch.cat([v_cache[:, :position], value], dim=1)
    probs = torch.softmax(query @ keys.transpose(-2, -1) / math.sqrt(query.size(-1)), dim=-1)
    return probs @ values, k_cache, v_cache
