# expect: heads
# bug: splits the features into heads as (d_k, H) instead of (H, d_k), so each head gets every H-th feature
"""The head split written as reshape(B, T, d_k, H) and transposed into place: the shapes come out
right, but head h holds features h, h + H, h + 2H, ... instead of the contiguous block
h·d_k .. (h+1)·d_k - 1 that the weights' rows are laid out for. The merge undoes the same layout,
so with one head the answer is right.
"""
import math

import torch


def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, attn_mask=None, is_causal=False):
    B, L, D = x_q.shape
    S = x_kv.shape[1]
    d_k = D // num_heads

    def split(x, T):
        return x.reshape(B, T, d_k, num_heads).permute(0, 3, 1, 2)   # (B, H, T, d_k)

    q, k, v = split(x_q @ w_q.T, L), split(x_kv @ w_k.T, S), split(x_kv @ w_v.T, S)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if is_causal:
        scores = scores.masked_fill(torch.ones(L, S, dtype=torch.bool).triu(1), float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool \
            else scores + attn_mask
    out = torch.softmax(scores, dim=-1) @ v                            # (B, H, L, d_k)
    return out.permute(0, 2, 3, 1).reshape(B, L, D) @ w_o.T
