"""The skill skipped: no scores, no softmax; every query gets the mean of the (unmasked) values."""
import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    weights = torch.ones(query.size(-2), key.size(-2), dtype=query.dtype)
    if is_causal:
        weights = weights.tril()
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        weights = weights * attn_mask
    return weights / weights.sum(-1, keepdim=True) @ value
