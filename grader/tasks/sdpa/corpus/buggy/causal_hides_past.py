# expect: causal
# bug: builds the causal mask with tril(-1) and masks where it is True, hiding the past
import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    scale = scale or 1 / math.sqrt(query.size(-1))
    s = query @ key.mT * scale
    L, S = s.shape[-2:]
    if is_causal:
        s = s.masked_fill(torch.ones(L, S, dtype=torch.bool).tril(-1), float("-inf"))
    elif attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else s + attn_mask
    return s.softmax(-1) @ value
