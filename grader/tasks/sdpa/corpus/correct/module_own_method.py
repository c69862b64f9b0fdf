"""A tutorial-style nn.Module: an identity projection stored on ``self`` and a method of its own
named scaled_dot_product_attention (storing into ``self`` does not make it torch, and the method
is the file's own, not torch's)."""
import math

import torch
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Identity()  # where a full layer would put its output projection
        self.dropout = nn.Dropout(0.0)

    def scaled_dot_product_attention(self, q, k, v, mask=None, causal=False, scale=None):
        scale = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
        scores = q @ k.transpose(-2, -1) * scale  # (..., L, S)
        if causal:
            keep = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool, device=q.device).tril()
            scores = scores.masked_fill(~keep, float("-inf"))
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
        return self.dropout(torch.softmax(scores, dim=-1)) @ v  # (..., L, Ev)

    def forward(self, q, k, v, mask=None, causal=False, scale=None):
        return self.proj(self.scaled_dot_product_attention(q, k, v, mask, causal, scale))


attention = SelfAttention().eval()


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    return attention(query, key, value, attn_mask, is_causal, scale)
