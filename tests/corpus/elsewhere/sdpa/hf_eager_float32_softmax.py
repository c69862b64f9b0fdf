"""Hugging Face eager-attention style: matmul, scaling, an additive mask built from the boolean
one, and the softmax computed in float32 and cast back (as the eager Llama attention does)."""
import torch
from torch import nn


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    scaling = query.shape[-1] ** -0.5 if scale is None else scale
    attn_weights = torch.matmul(query, key.transpose(-1, -2)) * scaling
    causal_mask = None
    if is_causal:
        L, S = query.shape[-2], key.shape[-2]
        causal_mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
    for mask in (attn_mask, causal_mask):
        if mask is None:
            continue
        if mask.dtype == torch.bool:
            mask = torch.zeros(mask.shape, dtype=attn_weights.dtype, device=mask.device).masked_fill(
                ~mask, torch.finfo(attn_weights.dtype).min)
        attn_weights = attn_weights + mask
    attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
    return torch.matmul(attn_weights, value)
