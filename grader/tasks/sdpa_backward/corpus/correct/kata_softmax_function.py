"""A softmax whose backward is the Jacobian-vector product (diag(z) − zzᵀ)·dz, built into attention by hand.

Source: https://github.com/jeffdshen/ml-kata, kata8/softmax.py (``SoftmaxFunction.backward``: the
comments derive dz_i/dx_i = z_i(1 − z_i), dz_i/dx_j = −z_i·z_j, and the code forms dz ⊙ z − z·(zᵀdz)
with batched matrix products; no licence file in the repository). Adapted, not copied: the same
product, written as its own function, sits between the two matrix-product backwards of attention;
masks, is_causal and scale= are the task's; no autograd.Function (its backward is called directly).
Why correct: (diag(z) − zzᵀ)·dz = z ⊙ dz − z·(z·dz), the exact softmax Jacobian-vector product.
"""
import math

import torch


def softmax_backward(z, dz):
    """dL/dx for z = softmax(x) along the last dim, given dz = dL/dz."""
    square = (z.unsqueeze(-1) @ (z.unsqueeze(-2) @ dz.unsqueeze(-1))).squeeze(-1)
    return dz * z - square


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    x = query @ key.transpose(-2, -1) * scale
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        x = x.masked_fill(~attn_mask, float("-inf"))
    elif attn_mask is not None:
        x = x + attn_mask
    if is_causal:
        x = x.masked_fill(torch.ones(x.shape[-2:], dtype=torch.bool, device=x.device).triu(1), float("-inf"))
    z = torch.softmax(x, dim=-1)
    d_value = z.transpose(-2, -1) @ grad_out
    dx = softmax_backward(z, grad_out @ value.transpose(-2, -1)) * scale
    return dx @ key, dx.transpose(-2, -1) @ query, d_value
