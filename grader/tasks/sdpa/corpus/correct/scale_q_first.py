"""Scales the queries before the product and fills masked scores with finfo.min instead of -inf."""
import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    scale = query.size(-1) ** -0.5 if scale is None else scale
    q = query * scale
    scores = q @ key.mT
    big_negative = torch.finfo(scores.dtype).min
    if is_causal:
        L, S = scores.shape[-2:]
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), big_negative)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, big_negative)
        else:
            scores = scores + attn_mask
    return torch.nn.functional.softmax(scores, dim=-1) @ value
