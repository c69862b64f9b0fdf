# expect: mask
# bug: turns a float mask into a boolean one with .bool() (0 becomes False: hidden; -inf becomes True: kept)
"""One code path for both mask kinds: ``attn_mask.bool()`` before masked_fill. For an additive mask,
the 0 entries (may attend) become False and the -inf ones (hidden) True, so the mask is inverted,
and any finite bias is lost.
"""
import math

import torch


def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, attn_mask=None, is_causal=False):
    B, L, D = x_q.shape
    S = x_kv.size(1)
    H, d = num_heads, D // num_heads
    q = (x_q @ w_q.T).view(B, L, H, d).transpose(1, 2)
    k = (x_kv @ w_k.T).view(B, S, H, d).transpose(1, 2)
    v = (x_kv @ w_v.T).view(B, S, H, d).transpose(1, 2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
    if is_causal:
        att = att.masked_fill(torch.tril(torch.ones(L, S, dtype=torch.bool)) == 0, float("-inf"))
    if attn_mask is not None:
        att = att.masked_fill(~attn_mask.bool(), float("-inf"))
    y = torch.softmax(att, dim=-1) @ v
    return y.transpose(1, 2).contiguous().view(B, L, D) @ w_o.T
