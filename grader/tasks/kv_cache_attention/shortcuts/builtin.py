"""The reference solution with torch's built-in attention swapped in (attn-grader tasks validate: refused)."""
import torch.nn.functional as F


def kv_cache_attention(query, key, value, k_cache, v_cache, position):
    k_cache, v_cache = k_cache.clone(), v_cache.clone()
    k_cache[:, position] = key[:, 0]
    v_cache[:, position] = value[:, 0]
    out = F.scaled_dot_product_attention(query, k_cache[:, :position + 1], v_cache[:, :position + 1])
    return out, k_cache, v_cache
