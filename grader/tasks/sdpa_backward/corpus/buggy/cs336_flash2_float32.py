# expect: dtype
"""FlashAttention-2's backward by recomputation, computed in float32 and returned that way.

Source: the recomputation backward of Stanford CS336 (Spring 2025) assignment 2 as written in
public solutions (``flash_bwd_recompute_impl``: ``qf = q.float()``, ``kf = k.float()``, … before
S = QKᵀ·scale; e.g. the cs336_systems/flash_attention.py files of
https://github.com/CTKnight/stanford-cs336-assignment2-systems and its many siblings; no licence
file). Adapted, not copied: the task's masks, scale= and 3-D/4-D inputs; no cast back at the end.
Bug: every gradient comes back as float32, whatever the inputs' dtype: float64 inputs get float64's
values rounded to float32, in the wrong dtype. The values are right to float32 precision.
"""
import math

import torch


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    qf, kf, vf, dof = query.float(), key.float(), value.float(), grad_out.float()
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    S = torch.matmul(qf, kf.transpose(-1, -2)) * scale
    if attn_mask is not None:
        S = S.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else S + attn_mask.float()
    if is_causal:
        q_idx = torch.arange(S.shape[-2], device=S.device).unsqueeze(1)
        k_idx = torch.arange(S.shape[-1], device=S.device).unsqueeze(0)
        S = torch.where(q_idx >= k_idx, S, torch.full_like(S, float("-inf")))
    Lf = torch.logsumexp(S, dim=-1)
    P = torch.exp(S - Lf.unsqueeze(-1))
    of = P @ vf
    D = (of * dof).sum(-1)
    dV = P.transpose(-1, -2) @ dof
    dS = P * (dof @ vf.transpose(-1, -2) - D.unsqueeze(-1))
    return (dS @ kf) * scale, (dS.transpose(-1, -2) @ qf) * scale, dV
