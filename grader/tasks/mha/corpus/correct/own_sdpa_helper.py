"""Calls its own helper named like torch's function: a local name is not torch's attention."""
import math

import torch
import torch.nn.functional as F


def scaled_dot_product_attention(q, k, v, mask=None, causal=False):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if causal:
        mask = torch.ones(scores.shape[-2:], dtype=torch.bool).tril()
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    return F.softmax(scores, dim=-1) @ v


def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, attn_mask=None, is_causal=False):
    B, L, D = x_q.shape
    S = x_kv.shape[1]
    split = lambda x, T: x.view(B, T, num_heads, D // num_heads).permute(0, 2, 1, 3)
    q, k, v = split(F.linear(x_q, w_q), L), split(F.linear(x_kv, w_k), S), split(F.linear(x_kv, w_v), S)
    out = scaled_dot_product_attention(q, k, v, attn_mask, is_causal)  # (B, H, L, d_k)
    return F.linear(out.permute(0, 2, 1, 3).contiguous().view(B, L, D), w_o)
