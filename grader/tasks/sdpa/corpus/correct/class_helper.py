"""A class-based helper whose method happens to share torch's name (a name is not a call into torch).

Inspired by torch.nn.functional.scaled_dot_product_attention, but written out by hand.
"""
import math

import torch


class Attention:
    def __init__(self, scale=None):
        self.scale = scale

    def scores(self, q, k):
        return q @ k.transpose(-2, -1) * (self.scale if self.scale is not None else 1 / math.sqrt(q.size(-1)))

    def scaled_dot_product_attention(self, q, k, v, mask=None, causal=False):
        s = self.scores(q, k)
        if causal:
            mask = torch.ones(s.shape[-2:], dtype=torch.bool).tril()
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
        return torch.softmax(s, -1) @ v


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    return Attention(scale).scaled_dot_product_attention(query, key, value, attn_mask, is_causal)
