# honest: activation checkpointing (torch.utils.checkpoint imports torch._dynamo, which the old block broke)
import math
import torch
from torch.utils.checkpoint import checkpoint


def _core(q, k, v, bias):
    return torch.softmax(q @ k.transpose(-2, -1) + bias, dim=-1) @ v


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    L, S = query.size(-2), key.size(-2)
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    bias = torch.zeros(L, S, dtype=query.dtype, device=query.device)
    if is_causal:
        bias = bias.masked_fill(~torch.ones(L, S, dtype=torch.bool, device=query.device).tril(), float("-inf"))
    if attn_mask is not None:
        bias = bias.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else bias + attn_mask
    return checkpoint(_core, query * scale, key, value, bias, use_reentrant=False)
