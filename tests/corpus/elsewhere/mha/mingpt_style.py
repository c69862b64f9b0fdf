"""minGPT-style layer: one projection per weight, heads split with view + transpose, the
attention written out, merged with contiguous().view; the mask as minGPT's registered tril."""
import math

import torch
import torch.nn.functional as F


def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, attn_mask=None, is_causal=False):
    B, T, C = x_q.size()
    S = x_kv.size(1)
    k = F.linear(x_kv, w_k).view(B, S, num_heads, C // num_heads).transpose(1, 2)  # (B, nh, S, hs)
    q = F.linear(x_q, w_q).view(B, T, num_heads, C // num_heads).transpose(1, 2)   # (B, nh, T, hs)
    v = F.linear(x_kv, w_v).view(B, S, num_heads, C // num_heads).transpose(1, 2)  # (B, nh, S, hs)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    if is_causal:
        bias = torch.tril(torch.ones(T, S, device=x_q.device)).view(1, 1, T, S)
        att = att.masked_fill(bias == 0, float("-inf"))
    if attn_mask is not None:
        att = att.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else att + attn_mask
    att = F.softmax(att, dim=-1)
    y = att @ v                                                   # (B, nh, T, hs)
    y = y.transpose(1, 2).contiguous().view(B, T, C)
    return F.linear(y, w_o)
