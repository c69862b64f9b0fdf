# expect: inputs
"""Right gradients, but the query is scaled in place: the caller's tensor changes."""
import math

import torch


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    s = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    query.mul_(s)  # query now holds s·Q
    scores = query @ key.transpose(-2, -1)
    if is_causal:
        L, S = scores.shape[-2:]
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
    p = torch.softmax(scores, dim=-1)
    d_value = p.transpose(-2, -1) @ grad_out
    d_p = grad_out @ value.transpose(-2, -1)
    d_scores = p * (d_p - (d_p * p).sum(dim=-1, keepdim=True))
    return d_scores @ key * s, d_scores.transpose(-2, -1) @ query, d_value
