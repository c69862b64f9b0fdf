# expect: mask
# bug: adds the float mask before scaling, so the bias is multiplied by the scale too
"""The additive bias folded into the raw dot products (the way relative-position biases are often
added), then everything scaled: softmax((QKᵀ + M)·s) instead of softmax(QKᵀ·s + M).

Style: a small module-level helper for the probabilities, reused by nothing else.
"""
import math

import torch


def _attention_probs(q, k, attn_mask, is_causal, scale):
    logits = q @ k.transpose(-2, -1)
    if attn_mask is not None and attn_mask.dtype != torch.bool:
        logits = logits + attn_mask
    logits = logits * scale
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        logits = logits.masked_fill(~attn_mask, float("-inf"))
    if is_causal:
        L, S = logits.shape[-2:]
        logits = logits.masked_fill(torch.ones(L, S, dtype=torch.bool, device=q.device).tril() == 0,
                                    float("-inf"))
    return torch.softmax(logits, dim=-1)


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    p = _attention_probs(query, key, attn_mask, is_causal, scale)
    dv = p.transpose(-2, -1) @ grad_out
    dp = grad_out @ value.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    return (ds @ key) * scale, (ds.transpose(-2, -1) @ query) * scale, dv
