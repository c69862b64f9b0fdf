"""The Annotated Transformer's attention() and MultiHeadedAttention.forward, with the weights passed in."""
import math

import torch


def attention(query, key, value, mask=None):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9) if mask.dtype == torch.bool else scores + mask
    p_attn = scores.softmax(dim=-1)
    return torch.matmul(p_attn, value), p_attn


def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, attn_mask=None, is_causal=False):
    nbatches = x_q.size(0)
    h, d_k = num_heads, x_q.size(-1) // num_heads
    linears = [lambda x, w=w: x @ w.T for w in (w_q, w_k, w_v)]
    query, key, value = [lin(x).view(nbatches, -1, h, d_k).transpose(1, 2)
                         for lin, x in zip(linears, (x_q, x_kv, x_kv))]
    if is_causal:
        attn_mask = torch.ones(query.size(-2), key.size(-2), dtype=torch.bool).tril()
    x, _ = attention(query, key, value, mask=attn_mask)
    x = x.transpose(1, 2).contiguous().view(nbatches, -1, h * d_k)
    return x @ w_o.T
