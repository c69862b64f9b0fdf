# expect: scale
import math

import torch


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    s = 1 / math.sqrt(query.size(-1))
    scores = query @ key.transpose(-2, -1) * s
    if is_causal:
        L, S = scores.shape[-2:]
        keep = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    p = torch.softmax(scores, dim=-1)
    d_value = p.transpose(-2, -1) @ grad_out
    d_p = grad_out @ value.transpose(-2, -1)
    d_scores = p * (d_p - (d_p * p).sum(dim=-1, keepdim=True))
    d_query = d_scores @ key * s
    d_key = d_scores.transpose(-2, -1) @ query * s
    return d_query, d_key, d_value
