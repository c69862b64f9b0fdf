"""One query row at a time, with the softmax Jacobian diag(p) − ppᵀ written out as a matrix."""
import math

import torch


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    batch = query.shape[:-2]
    L, E = query.shape[-2:]
    S, Ev = value.shape[-2:]
    q, k, v, g = (t.reshape(-1, *t.shape[-2:]) for t in (query, key, value, grad_out))
    if attn_mask is not None:
        mask = attn_mask.expand(*batch, L, S).reshape(-1, L, S)
    c = scale if scale is not None else 1 / math.sqrt(E)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    for n in range(q.shape[0]):
        for i in range(L):
            s = (k[n] @ q[n, i]) * c
            if is_causal:
                s = torch.cat([s[: i + 1], torch.full((S - i - 1,), float("-inf"), dtype=s.dtype)]) if i + 1 < S else s
            if attn_mask is not None:
                m = mask[n, i]
                s = s.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else s + m
            p = torch.softmax(s, dim=0)
            dv[n] += torch.outer(p, g[n, i])
            dp = v[n] @ g[n, i]
            jac = torch.diag(p) - torch.outer(p, p)
            ds = jac @ dp
            dq[n, i] = c * (ds @ k[n])
            dk[n] += c * torch.outer(ds, q[n, i])
    return dq.reshape(query.shape), dk.reshape(key.shape), dv.reshape(value.shape)
