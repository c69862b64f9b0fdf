"""llm.c's CPU attention backward: one query row at a time, the softmax through its local derivative.

Source: https://github.com/karpathy/llm.c, dev/cuda/attention_backward.cu, ``attention_backward_cpu``
(MIT licence). Adapted, not copied: llm.c walks (batch, time, head) in C with scalar loops over the
keys and the head dimension; here the same passes run per query row with the head dimension and the
batch vectorised: pass 4 backwards (datt = dO·vᵀ, dV += att·dO), passes 2 and 3 backwards (the
softmax through local_derivative[t2, t3] = att[t2]·(1[t2 = t3] − att[t3])), pass 1 backwards
(dQ += dpreatt·K, dK += dpreattᵀ·Q). llm.c is causal only and fuses the scale into the softmax; the
task's masks, scale= and rectangular L ≠ S are added.
Why correct: it is the chain rule written out per row, with the full softmax Jacobian.
"""
import math

import torch


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    L, S = query.shape[-2], key.shape[-2]
    c = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    dquery, dkey, dvalue = torch.zeros_like(query), torch.zeros_like(key), torch.zeros_like(value)
    eye = torch.eye(S, dtype=query.dtype, device=query.device)
    for t in range(L):
        preatt = (key @ query[..., t, :, None]).squeeze(-1) * c              # (..., S)
        if attn_mask is not None:
            row = attn_mask[..., t, :] if attn_mask.shape[-2] == L else attn_mask[..., 0, :]
            preatt = preatt.masked_fill(~row, float("-inf")) if row.dtype == torch.bool else preatt + row
        if is_causal:
            preatt = preatt.masked_fill(torch.arange(S, device=query.device) > t, float("-inf"))
        att = torch.softmax(preatt, dim=-1)                                   # (..., S)
        dout = grad_out[..., t, :]                                           # (..., Ev)
        datt = (value @ dout[..., None]).squeeze(-1)                         # pass 4, backwards
        dvalue += att[..., :, None] * dout[..., None, :]
        local = att[..., :, None] * (eye - att[..., None, :])               # [t2, t3]
        dpreatt = c * (local * datt[..., :, None]).sum(-2)                  # passes 2 and 3, backwards
        dquery[..., t, :] = (dpreatt[..., None, :] @ key).squeeze(-2)       # pass 1, backwards
        dkey += dpreatt[..., :, None] * query[..., t, None, :]
    return dquery, dkey, dvalue
