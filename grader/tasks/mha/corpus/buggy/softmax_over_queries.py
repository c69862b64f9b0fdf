# expect: output
# bug: softmax over dim=-2
import math

import torch


def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, attn_mask=None, is_causal=False):
    B, L, D = x_q.shape
    S = x_kv.size(1)
    d_k = D // num_heads
    split = lambda x, T: x.reshape(B, T, num_heads, d_k).transpose(1, 2)  # (B, H, T, d_k)
    q, k, v = split(x_q @ w_q.T, L), split(x_kv @ w_k.T, S), split(x_kv @ w_v.T, S)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (B, H, L, S)
    if is_causal:
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    heads = torch.softmax(scores, dim=-2) @ v  # (B, H, L, d_k)
    merged = heads.transpose(1, 2).reshape(B, L, D)
    return merged @ w_o.T
