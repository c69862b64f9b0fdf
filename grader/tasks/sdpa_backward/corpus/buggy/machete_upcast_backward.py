# expect: stability
"""A backward that upcasts to float32 first, as reference attentions for half-precision kernels do.

Source: https://github.com/b-albar/machete, src/machete/utils/references/attention/attention_ref.py,
``attn_ref(..., upcast=True)``: ``q, k, v = q.float(), k.float(), v.float()`` and
``torch.softmax(p.float(), dim=-1).to(q.dtype)`` (licence not stated in the file). Adapted: the
upcast is kept, the backward is written by hand (dV = Pᵀ dO, dS = P ⊙ (dP − rowsum(dP ⊙ P))) with the
task's masks and scale=, and the gradients are cast back to the inputs' dtype.

The bug (issue 40: it scored 100 while no case drew its input): for float64 inputs everything runs in
float32. Ordinary float64 cases pass (float32's rounding is within what the scored checks admit),
but float64 scores beyond float32's range overflow to inf inside and the gradients come back NaN
(stability.large_scores).
"""
import math

import torch


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    dtype = query.dtype
    q, k, v, do = query.float(), key.float(), value.float(), grad_out.float()   # the upcast
    scale = 1 / math.sqrt(q.size(-1)) if scale is None else scale
    s = q @ k.transpose(-2, -1) * scale                                          # (..., L, S)
    if is_causal:
        L, S = s.shape[-2:]
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool, device=s.device).tril(), float("-inf"))
    elif attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else s + attn_mask.float()
    p = torch.softmax(s, dim=-1)
    dv = p.transpose(-2, -1) @ do
    dp = do @ v.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds @ k * scale
    dk = ds.transpose(-2, -1) @ q * scale
    return dq.to(dtype), dk.to(dtype), dv.to(dtype)
