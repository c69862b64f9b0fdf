"""Dive-into-Deep-Learning style: a DotProductAttention module with bmm and a masked_softmax helper."""
import math

import torch
from torch import nn


def masked_softmax(X, keep):
    """Softmax over the last axis; positions where keep is False get -1e6 first (d2l's convention)."""
    if keep is None:
        return nn.functional.softmax(X, dim=-1)
    X = X.clone()
    X[~keep] = -1e6
    return nn.functional.softmax(X, dim=-1)


class DotProductAttention(nn.Module):
    def forward(self, queries, keys, values, keep=None, bias=None, scale=None):
        d = queries.shape[-1]
        scores = torch.bmm(queries, keys.transpose(1, 2)) * (1 / math.sqrt(d) if scale is None else scale)
        if bias is not None:
            scores = scores + bias
        self.attention_weights = masked_softmax(scores, keep)
        return torch.bmm(self.attention_weights, values)


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    L, S = query.shape[-2], key.shape[-2]
    flat = lambda t: t.expand(*batch, *t.shape[-2:]).reshape(-1, *t.shape[-2:])
    keep = bias = None
    if is_causal:
        attn_mask = torch.ones(L, S, dtype=torch.bool).tril()
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        keep = attn_mask.expand(*batch, L, S).reshape(-1, L, S)
    elif attn_mask is not None:
        bias = attn_mask.expand(*batch, L, S).reshape(-1, L, S)
    out = DotProductAttention()(flat(query), flat(key), flat(value), keep, bias, scale)
    return out.reshape(*batch, L, value.shape[-1])
