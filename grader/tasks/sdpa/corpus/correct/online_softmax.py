"""Blockwise over the keys with an online (running max / running sum) softmax, like FlashAttention."""
import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None, block=4):
    L, S = query.size(-2), key.size(-2)
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    if is_causal:
        attn_mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        attn_mask = torch.zeros(attn_mask.shape, dtype=query.dtype, device=query.device).masked_fill(
            ~attn_mask, float("-inf"))
    batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    running_max = torch.full((*batch, L, 1), float("-inf"), dtype=query.dtype)
    running_sum = torch.zeros((*batch, L, 1), dtype=query.dtype)
    acc = torch.zeros((*batch, L, value.size(-1)), dtype=query.dtype)
    for start in range(0, S, block):
        k, v = key[..., start:start + block, :], value[..., start:start + block, :]
        s = query @ k.transpose(-2, -1) * scale  # (..., L, block)
        if attn_mask is not None:
            s = s + attn_mask[..., start:start + block]
        new_max = torch.maximum(running_max, s.amax(-1, keepdim=True))
        safe_max = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        correction = torch.exp(running_max - safe_max)
        p = torch.exp(s - safe_max)
        running_sum = running_sum * correction + p.sum(-1, keepdim=True)
        acc = acc * correction + p @ v
        running_max = new_max
    return acc / running_sum
