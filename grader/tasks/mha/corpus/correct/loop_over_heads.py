"""One head at a time on column slices of the projections, then concatenate."""
import math

import torch


def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, attn_mask=None, is_causal=False):
    D = x_q.size(-1)
    dk = D // num_heads
    Q, K, V = x_q @ w_q.t(), x_kv @ w_k.t(), x_kv @ w_v.t()
    outputs = []
    for h in range(num_heads):
        cols = slice(h * dk, (h + 1) * dk)
        s = Q[..., cols] @ K[..., cols].transpose(1, 2) / math.sqrt(dk)  # (B, L, S)
        if is_causal:
            s = s.masked_fill(torch.ones(s.shape[-2:]).tril() == 0, float("-inf"))
        if attn_mask is not None:
            m = attn_mask[:, h] if attn_mask.dim() == 4 and attn_mask.size(1) > 1 else attn_mask
            if m.dim() == 4:
                m = m[:, 0]
            s = s.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else s + m
        outputs.append(torch.softmax(s, dim=-1) @ V[..., cols])
    return torch.cat(outputs, dim=-1) @ w_o.t()
