"""The tutorial multi-head layer as an nn.Module: projections with F.linear on the given weights,
``self.proj = nn.Identity()`` as the placeholder for dropout/extra layers, and its own method
named scaled_dot_product_attention.

Style: split_heads / merge_heads helpers with view + transpose, contiguous() before the merge.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.proj = nn.Identity()

    def split_heads(self, x):
        B, T, D = x.size()
        return x.view(B, T, self.num_heads, D // self.num_heads).transpose(1, 2)

    def merge_heads(self, x):
        B, H, T, d = x.size()
        return x.transpose(1, 2).contiguous().view(B, T, H * d)

    def scaled_dot_product_attention(self, q, k, v, attn_mask=None, is_causal=False):
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
        if is_causal:
            L, S = q.size(-2), k.size(-2)
            causal = torch.ones(L, S, dtype=torch.bool, device=q.device).tril()
            scores = scores.masked_fill(~causal, float("-inf"))
        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:
                scores = scores.masked_fill(~attn_mask, float("-inf"))
            else:
                scores = scores + attn_mask
        return torch.matmul(F.softmax(scores, dim=-1), v)

    def forward(self, x_q, x_kv, w_q, w_k, w_v, w_o, attn_mask=None, is_causal=False):
        q = self.split_heads(F.linear(x_q, w_q))
        k = self.split_heads(F.linear(x_kv, w_k))
        v = self.split_heads(F.linear(x_kv, w_v))
        out = self.scaled_dot_product_attention(q, k, v, attn_mask, is_causal)
        return self.proj(F.linear(self.merge_heads(out), w_o))


def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, attn_mask=None, is_causal=False):
    return MultiHeadAttention(num_heads)(x_q, x_kv, w_q, w_k, w_v, w_o, attn_mask, is_causal)
