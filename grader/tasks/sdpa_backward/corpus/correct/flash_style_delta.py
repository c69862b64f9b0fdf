"""FlashAttention-2's backward written out without tiles: the forward's output O and logsumexp are
kept, P is recomputed from them, and the row term is D = rowsum(dO ⊙ O) instead of rowsum(dP ⊙ P).

Style: the papers' pseudo-code variable names (lse, delta), the mask as an additive bias built once.
"""
import math

import torch


def _bias(attn_mask, is_causal, L, S, like):
    bias = torch.zeros(L, S, dtype=like.dtype, device=like.device)
    if is_causal:
        bias = bias.masked_fill(torch.ones(L, S, dtype=torch.bool, device=like.device).tril().logical_not(),
                                float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            bias = bias.masked_fill(attn_mask.logical_not(), float("-inf"))
        else:
            bias = bias + attn_mask
    return bias


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    softmax_scale = scale if scale is not None else 1 / math.sqrt(query.shape[-1])
    s = query @ key.transpose(-2, -1) * softmax_scale + _bias(attn_mask, is_causal, query.shape[-2],
                                                              key.shape[-2], query)
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    o = torch.exp(s - lse) @ value                        # what the forward saved

    p = torch.exp(s - lse)                                # recomputed, as the kernel does
    delta = (grad_out * o).sum(dim=-1, keepdim=True)      # = rowsum(dP ⊙ P)
    dv = p.transpose(-2, -1) @ grad_out
    dp = grad_out @ value.transpose(-2, -1)
    ds = p * (dp - delta)
    dq = softmax_scale * ds @ key
    dk = softmax_scale * ds.transpose(-2, -1) @ query
    return dq, dk, dv
