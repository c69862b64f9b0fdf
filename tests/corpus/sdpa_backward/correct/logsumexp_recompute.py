"""FlashAttention's backward: keep the row log-sum-exp, recompute P from it, use delta = rowsum(dO ⊙ O)."""
import math

import torch


def _scores(query, key, attn_mask, is_causal, scale):
    s = query @ key.transpose(-2, -1) * scale
    if is_causal:
        L, S = s.shape[-2:]
        s = s.masked_fill(torch.ones(L, S, dtype=torch.bool, device=s.device).tril().logical_not(), -math.inf)
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, -math.inf) if attn_mask.dtype == torch.bool else s + attn_mask
    return s


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    scale = 1.0 / math.sqrt(query.size(-1)) if scale is None else scale
    s = _scores(query, key, attn_mask, is_causal, scale)
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    out = torch.exp(s - lse) @ value
    delta = (grad_out * out).sum(-1, keepdim=True)      # equals rowsum(dP ⊙ P)
    p = torch.exp(s - lse)                              # recomputed, masked entries exp(-inf) = 0
    dv = p.transpose(-1, -2) @ grad_out
    ds = p * (grad_out @ value.transpose(-1, -2) - delta)
    return (ds @ key) * scale, (ds.transpose(-1, -2) @ query) * scale, dv
