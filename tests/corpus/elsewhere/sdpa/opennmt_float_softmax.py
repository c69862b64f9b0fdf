"""OpenNMT style: the query divided by sqrt(dim) first, scores cast to float for the softmax,
masked_fill with a very negative number, and the result cast back to the input's dtype."""
import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    if scale is None:
        query = query / math.sqrt(query.size(-1))
    else:
        query = query * scale
    scores = torch.matmul(query, key.transpose(-2, -1)).float()
    if attn_mask is not None and attn_mask.dtype != torch.bool:
        scores = scores + attn_mask.float()
    hide = None
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        hide = ~attn_mask
    if is_causal:
        L, S = query.size(-2), key.size(-2)
        hide = ~torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
    if hide is not None:
        scores = scores.masked_fill(hide, -1e18)
    attn = torch.softmax(scores, dim=-1).to(query.dtype)
    return torch.matmul(attn, value)
