# expect: mask
# bug: expands the mask to (B·H, L, S) with repeat instead of repeat_interleave
import math

import torch


def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, attn_mask=None, is_causal=False):
    B, L, D = x_q.shape
    S = x_kv.size(1)
    d_k = D // num_heads
    q = (x_q @ w_q.T).reshape(B, L, num_heads, d_k).transpose(1, 2)   # (B, H, L, d_k)
    k = (x_kv @ w_k.T).reshape(B, S, num_heads, d_k).transpose(1, 2)  # (B, H, S, d_k)
    v = (x_kv @ w_v.T).reshape(B, S, num_heads, d_k).transpose(1, 2)  # (B, H, S, d_k)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)                 # (B, H, L, S)
    if is_causal:
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            m = attn_mask.expand(B, -1, L, S) if attn_mask.dim() == 4 else attn_mask.expand(B, 1, L, S)
            m = m[:, :1].reshape(B, L, S).repeat(num_heads, 1, 1)           # (B·H, L, S), wrong order
            if attn_mask.dim() == 4 and attn_mask.size(1) == num_heads:
                m = attn_mask.reshape(B * num_heads, L, S)
            scores = scores.reshape(B * num_heads, L, S).masked_fill(~m, float("-inf")).reshape(B, num_heads, L, S)
        else:
            scores = scores + attn_mask
    heads = torch.softmax(scores, dim=-1) @ v                          # (B, H, L, d_k)
    return heads.transpose(1, 2).reshape(B, L, D) @ w_o.T
