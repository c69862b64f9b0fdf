"""FlashAttention-2's backward by recomputation, as written for Stanford CS336 assignment 2.

Source: the PyTorch reference backward of the FlashAttention-2 part of CS336 (Spring 2025)
assignment 2, as solved in many public repositories, e.g.
https://github.com/CTKnight/stanford-cs336-assignment2-systems (cs336_systems/flash_attention.py;
no licence file) and the assignment's equations 13-19. Adapted, not copied: the forward keeps only
the row log-sum-exp L; the backward recomputes P = exp(S − L) from it and uses D = rowsum(dO ⊙ O)
in place of rowsum(dP ⊙ P), in einsum form; the task's masks, scale= and 3-D/4-D inputs are added.
Why correct: rowsum(dP ⊙ P) = rowsum((dO·Vᵀ) ⊙ P) = rowsum(dO ⊙ (P·V)) = rowsum(dO ⊙ O).
"""
import math

import torch


def _scores(q, k, attn_mask, is_causal, scale):
    s = torch.einsum("...qd,...kd->...qk", q, k) * scale
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else s + attn_mask
    if is_causal:
        n_q, n_k = s.shape[-2:]
        future = torch.arange(n_q, device=q.device)[:, None] < torch.arange(n_k, device=q.device)[None, :]
        s = s.masked_fill(future, float("-inf"))
    return s


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    S = _scores(query, key, attn_mask, is_causal, scale)
    L = torch.logsumexp(S, dim=-1)                                   # the forward keeps only this
    O = torch.einsum("...qk,...kd->...qd", torch.exp(S - L[..., None]), value)
    D = torch.sum(O * grad_out, dim=-1)                              # rowsum(dO ⊙ O)
    P = torch.exp(S - L[..., None])                                  # recomputed
    dV = torch.einsum("...qk,...qd->...kd", P, grad_out)
    dP = torch.einsum("...qd,...kd->...qk", grad_out, value)
    dS = P * (dP - D[..., None])
    dQ = torch.einsum("...qk,...kd->...qd", dS, key) * scale
    dK = torch.einsum("...qk,...qd->...kd", dS, query) * scale
    return dQ, dK, dV
