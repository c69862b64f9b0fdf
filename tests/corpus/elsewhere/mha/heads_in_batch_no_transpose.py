# expect: heads
"""Folds heads into the batch with view(B * H, L, d_k) straight from (B, L, D): the transpose is missing."""
import math

import torch


def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, attn_mask=None, is_causal=False):
    B, L, D = x_q.shape
    S, H = x_kv.shape[1], num_heads
    dk = D // H
    q = (x_q @ w_q.T).reshape(B * H, L, dk)
    k = (x_kv @ w_k.T).reshape(B * H, S, dk)
    v = (x_kv @ w_v.T).reshape(B * H, S, dk)
    s = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(dk)
    if is_causal:
        attn_mask = torch.ones(L, S, dtype=torch.bool).tril()
    if attn_mask is not None:
        m = attn_mask.expand(B, H, L, S).reshape(B * H, L, S) if attn_mask.dim() == 4 else attn_mask
        s = s.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else s + m
    out = torch.bmm(torch.softmax(s, -1), v).reshape(B, H, L, dk).transpose(1, 2).reshape(B, L, D)
    return out @ w_o.T
