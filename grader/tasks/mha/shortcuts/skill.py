"""The skill skipped: no heads. One attention over all D features, scaled by 1/sqrt(D)."""
import math

import torch


def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, attn_mask=None, is_causal=False):
    L, S = x_q.size(1), x_kv.size(1)
    q, k, v = x_q @ w_q.T, x_kv @ w_k.T, x_kv @ w_v.T
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if is_causal:
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if attn_mask is not None:
        mask = attn_mask if attn_mask.dim() < 4 else attn_mask[:, 0]
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    return torch.softmax(scores, dim=-1) @ v @ w_o.T
