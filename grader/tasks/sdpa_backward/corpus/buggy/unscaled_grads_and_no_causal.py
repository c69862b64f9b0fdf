# expect: scale
# bugs: several (two catalogue bugs at once: dQ and dK miss the scale, and is_causal is never read)
"""A first attempt with two independent slips: the chain rule through ``scores * s`` is forgotten for
dQ and dK, and the is_causal flag is accepted but never used.

Style: a short function, transposes with .mT.
"""
import math

import torch


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    s = scale or 1 / math.sqrt(query.shape[-1])
    scores = (query @ key.mT) * s
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, -torch.inf) if attn_mask.dtype == torch.bool else scores + attn_mask
    p = scores.softmax(-1)
    dv = p.mT @ grad_out
    dp = grad_out @ value.mT
    ds = p * (dp - (p * dp).sum(-1, keepdim=True))
    return ds @ key, ds.mT @ query, dv
