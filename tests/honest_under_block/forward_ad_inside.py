# honest: forward-mode AD used inside the function (a directional derivative of the softmax it
# then discards); the old block broke torch.func's imports
import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    L, S = query.size(-2), key.size(-2)
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    scores = query @ key.transpose(-2, -1) * scale
    if is_causal:
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool, device=query.device).tril(), float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
    weights, _ = torch.func.jvp(lambda s: torch.softmax(s, dim=-1), (scores,), (torch.zeros_like(scores),))
    return weights @ value
