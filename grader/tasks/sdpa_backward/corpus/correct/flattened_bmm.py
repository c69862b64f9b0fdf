"""The batch and head dimensions flattened into one with reshape, then torch.bmm for every product.

Style: older code that predates broadcasting matmul; it keeps the input's leading shape aside and
restores it at the end with view. The causal mask is a float -inf triangle added to the scores.
"""
import math

import torch


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    lead = query.shape[:-2]
    L, E = query.shape[-2:]
    S, Ev = key.shape[-2], value.shape[-1]
    q = query.reshape(-1, L, E)
    k = key.reshape(-1, S, E)
    v = value.reshape(-1, S, Ev)
    do = grad_out.reshape(-1, L, Ev)
    factor = (1.0 / math.sqrt(E)) if scale is None else scale

    logits = torch.bmm(q, k.transpose(1, 2)) * factor
    if is_causal:
        tri = torch.full((L, S), float("-inf"), dtype=logits.dtype, device=logits.device).triu(1)
        logits = logits + tri
    if attn_mask is not None:
        m = attn_mask.expand(*lead, L, S).reshape(-1, L, S)
        logits = logits.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else logits + m
    weights = torch.softmax(logits, dim=2)

    dv = torch.bmm(weights.transpose(1, 2), do)
    dw = torch.bmm(do, v.transpose(1, 2))
    dlogits = weights * (dw - (weights * dw).sum(2, keepdim=True))
    dq = torch.bmm(dlogits, k) * factor
    dk = torch.bmm(dlogits.transpose(1, 2), q) * factor
    return dq.view(*lead, L, E), dk.view(*lead, S, E), dv.view(*lead, S, Ev)
