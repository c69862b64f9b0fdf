"""flash-attention's test reference style: queries scaled first, einsum over named axes,
masked_fill with -inf, the softmax in float32, and rows with no visible key zeroed."""
import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    dtype_og = query.dtype
    q, k, v = query.float(), key.float(), value.float()
    softmax_scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = torch.einsum("...td,...sd->...ts", q * softmax_scale, k)
    keep = None
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            keep = attn_mask
        else:
            scores = scores + attn_mask.float()
    if is_causal:
        L, S = q.shape[-2], k.shape[-2]
        keep = torch.ones(L, S, dtype=torch.bool, device=q.device).tril()
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    attention = torch.softmax(scores, dim=-1)
    if keep is not None:  # a query that sees no key gets zeros, not NaN
        attention = attention.masked_fill(~keep.any(dim=-1, keepdim=True), 0.0)
    out = torch.einsum("...ts,...sd->...td", attention, v)
    return out.to(dtype_og)
