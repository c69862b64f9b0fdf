"""Stacks the four weights, computes in float64 and casts back; unflatten/flatten for the heads."""
import torch


def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, attn_mask=None, is_causal=False):
    dtype = x_q.dtype
    x_q, x_kv = x_q.double(), x_kv.double()
    D = x_q.size(-1)
    dk = D // num_heads
    q = (x_q @ w_q.double().T).unflatten(-1, (num_heads, dk)).transpose(-3, -2)
    k = (x_kv @ w_k.double().T).unflatten(-1, (num_heads, dk)).transpose(-3, -2)
    v = (x_kv @ w_v.double().T).unflatten(-1, (num_heads, dk)).transpose(-3, -2)
    scores = (q / dk ** 0.5) @ k.transpose(-1, -2)
    L, S = scores.shape[-2:]
    if is_causal:
        attn_mask = torch.ones(L, S, dtype=torch.bool).tril()
    if attn_mask is not None:
        scores = torch.where(attn_mask, scores, float("-inf")) if attn_mask.dtype == torch.bool \
            else scores + attn_mask.double()
    heads = torch.softmax(scores, dim=-1) @ v
    return (heads.transpose(-3, -2).flatten(-2) @ w_o.double().T).to(dtype)
