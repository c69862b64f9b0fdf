"""The fused-attention backward of Triton's tutorial, as plain PyTorch loops over blocks.

Source: https://github.com/triton-lang/triton, python/tutorials/06-fused-attention.py (MIT licence):
``_attn_bwd_preprocess`` (delta = rowsum(O ⊙ dO)), ``_attn_bwd_dkdv`` (for one block of keys, walk
the query blocks and accumulate dV += Pᵀ·dO and dK += dSᵀ·Q) and ``_attn_bwd_dq`` (for one block of
queries, walk the key blocks and accumulate dQ += dS·K), each P recomputed from the row
log-sum-exp. Adapted, not copied: Triton kernels become Python loops over slices of 4 rows, with the
task's masks, scale= and rectangular causal masks; dK and dQ take the scale at the end, as there.
Why correct: dS = P ⊙ (dP − delta) block by block, every block's share summed.
"""
import math

import torch

BLOCK = 4


def _masked(s, attn_mask, is_causal, rows, cols):
    if attn_mask is not None:
        m = attn_mask[..., rows, cols]
        s = s.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else s + m
    if is_causal:
        r = torch.arange(rows.start, rows.stop, device=s.device)[:, None]
        c = torch.arange(cols.start, cols.stop, device=s.device)[None, :]
        s = s.masked_fill(c > r, float("-inf"))
    return s


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    sm_scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    L, S = query.shape[-2], key.shape[-2]
    every_q, every_k = slice(0, L), slice(0, S)
    s_full = _masked(query @ key.transpose(-2, -1) * sm_scale, attn_mask, is_causal, every_q, every_k)
    lse = torch.logsumexp(s_full, dim=-1, keepdim=True)                         # kept by the forward
    out = torch.exp(s_full - lse) @ value
    delta = (out * grad_out).sum(-1, keepdim=True)                              # _attn_bwd_preprocess
    dq, dk, dv = torch.zeros_like(query), torch.zeros_like(key), torch.zeros_like(value)
    for start_n in range(0, S, BLOCK):                                          # _attn_bwd_dkdv
        cols = slice(start_n, min(start_n + BLOCK, S))
        k_blk, v_blk = key[..., cols, :], value[..., cols, :]
        for start_m in range(0, L, BLOCK):
            rows = slice(start_m, min(start_m + BLOCK, L))
            q_blk, do_blk = query[..., rows, :], grad_out[..., rows, :]
            s = _masked(q_blk @ k_blk.transpose(-2, -1) * sm_scale, attn_mask, is_causal, rows, cols)
            p = torch.exp(s - lse[..., rows, :])
            dv[..., cols, :] += p.transpose(-2, -1) @ do_blk
            dp = do_blk @ v_blk.transpose(-2, -1)
            ds = p * (dp - delta[..., rows, :])
            dk[..., cols, :] += ds.transpose(-2, -1) @ q_blk
    for start_m in range(0, L, BLOCK):                                          # _attn_bwd_dq
        rows = slice(start_m, min(start_m + BLOCK, L))
        q_blk, do_blk = query[..., rows, :], grad_out[..., rows, :]
        for start_n in range(0, S, BLOCK):
            cols = slice(start_n, min(start_n + BLOCK, S))
            s = _masked(q_blk @ key[..., cols, :].transpose(-2, -1) * sm_scale, attn_mask, is_causal, rows, cols)
            p = torch.exp(s - lse[..., rows, :])
            ds = p * (do_blk @ value[..., cols, :].transpose(-2, -1) - delta[..., rows, :])
            dq[..., rows, :] += ds @ key[..., cols, :]
    return dq * sm_scale, dk * sm_scale, dv
