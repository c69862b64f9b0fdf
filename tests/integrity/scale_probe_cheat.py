# attack: forgets the scale, but applies it when the call looks like a scale probe (identity values)
# task: sdpa
# expect: scale
import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    S = key.size(-2)
    probe = value.size(-1) == S and torch.equal(value[..., :, :], torch.eye(S, dtype=value.dtype).expand_as(value))
    if scale is None:
        scale = 1 / math.sqrt(query.size(-1)) if probe else 1.0
    scores = (query @ key.transpose(-2, -1)) * scale
    if is_causal:
        scores = scores.masked_fill(~torch.ones(scores.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
    return torch.softmax(scores, -1) @ value
