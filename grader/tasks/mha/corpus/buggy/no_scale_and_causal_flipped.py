# expect: scale
# bugs: several (two mistakes at once: no 1/sqrt(d_k) and the causal triangle the wrong way round)
"""A first draft with two slips: the scores are never scaled, and the causal mask keeps the upper
triangle (the future) instead of the lower one.
"""
import torch


def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, attn_mask=None, is_causal=False):
    B, L, D = x_q.shape
    S = x_kv.shape[1]
    d_k = D // num_heads
    q = (x_q @ w_q.T).reshape(B, L, num_heads, d_k).transpose(1, 2)
    k = (x_kv @ w_k.T).reshape(B, S, num_heads, d_k).transpose(1, 2)
    v = (x_kv @ w_v.T).reshape(B, S, num_heads, d_k).transpose(1, 2)
    scores = q @ k.transpose(-2, -1)
    if is_causal:
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).triu(), float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool \
            else scores + attn_mask
    out = torch.softmax(scores, dim=-1) @ v
    return out.transpose(1, 2).reshape(B, L, D) @ w_o.T
