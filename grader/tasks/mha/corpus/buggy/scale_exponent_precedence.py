# expect: scale
# bug: writes the scale as d_k ** -1/2, which Python reads as (d_k ** -1) / 2 = 1/(2·d_k)
"""An operator-precedence slip: ``head_dim ** -1/2`` meant d_k^(-1/2) but is 1/(2·d_k), so every
head's scores are scaled far too little.

Style: the scale kept on the instance-like closure, heads split with unflatten.
"""
import torch


def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, attn_mask=None, is_causal=False):
    head_dim = x_q.size(-1) // num_heads
    scale = head_dim ** -1/2

    def heads(x, w):
        return (x @ w.T).unflatten(-1, (num_heads, head_dim)).transpose(1, 2)

    q, k, v = heads(x_q, w_q), heads(x_kv, w_k), heads(x_kv, w_v)
    s = q @ k.transpose(-1, -2) * scale
    if is_causal:
        L, S = s.shape[-2:]
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool, device=s.device).tril(), float("-inf"))
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else s + attn_mask
    out = s.softmax(-1) @ v
    return out.transpose(1, 2).flatten(-2) @ w_o.T
