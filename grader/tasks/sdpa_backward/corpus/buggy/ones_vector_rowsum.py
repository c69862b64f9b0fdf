# expect: dtype
# bugs: several (the float32 ones make every float64 call raise, and most checks of this task call in float64: each is charged, since it could not check)
"""The row sum of the softmax Jacobian written as a product with a column of ones, the way it is
written on a whiteboard: rowsum(dP ⊙ P) = (dP ⊙ P) · 1. The ones are created with torch.ones's
default dtype (float32), so every float64 call raises a dtype error in matmul.
"""
import math

import torch


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    scores = query @ key.transpose(-1, -2) * scale
    L, S = scores.shape[-2:]
    if is_causal:
        scores = scores.masked_fill(torch.ones(L, S, dtype=torch.bool).tril().logical_not(), float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(attn_mask.logical_not(), float("-inf"))
        else:
            scores = scores + attn_mask
    probs = torch.softmax(scores, dim=-1)
    ones = torch.ones(S, 1)
    d_probs = grad_out @ value.transpose(-1, -2)
    d_scores = probs * (d_probs - (d_probs * probs) @ ones)
    return scale * d_scores @ key, scale * d_scores.transpose(-1, -2) @ query, probs.transpose(-1, -2) @ grad_out
