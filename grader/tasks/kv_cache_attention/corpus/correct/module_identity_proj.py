"""A tutorial decoder's cached step as an nn.Module: ``self.proj = nn.Identity()`` where the output
projection would go, its own method named scaled_dot_product_attention, the caches updated with
index_copy on copies.

Style: the "KV cache from scratch" layout: update, then attend over cache[:, :position + 1].
"""
import math

import torch
from torch import nn


class CachedAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Identity()

    def scaled_dot_product_attention(self, q, k, v):
        attn = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
        return torch.matmul(attn.softmax(dim=-1), v)

    def forward(self, query, key, value, k_cache, v_cache, position):
        idx = torch.tensor([position], device=k_cache.device)
        k_cache = k_cache.index_copy(1, idx, key)
        v_cache = v_cache.index_copy(1, idx, value)
        out = self.scaled_dot_product_attention(query, k_cache[:, :position + 1], v_cache[:, :position + 1])
        return self.proj(out), k_cache, v_cache


def kv_cache_attention(query, key, value, k_cache, v_cache, position):
    return CachedAttention()(query, key, value, k_cache, v_cache, position)
