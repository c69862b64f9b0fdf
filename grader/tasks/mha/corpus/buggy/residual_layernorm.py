# expect: output
# bug: adds the residual and a LayerNorm inside the attention layer
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
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    heads = torch.softmax(scores, dim=-1) @ v                          # (B, H, L, d_k)
    out = heads.transpose(1, 2).reshape(B, L, D) @ w_o.T
    return torch.nn.functional.layer_norm(x_q + out, (D,))
