# expect: output
"""The Triton tutorial's block backward, with the key block's gradient assigned instead of accumulated.

Source: https://github.com/triton-lang/triton, python/tutorials/06-fused-attention.py (MIT licence),
``_attn_bwd_dkdv``: for one block of keys it walks every block of queries and accumulates
``dk += tl.dot(dsT, tl.trans(qT))``. Adapted, not copied, into PyTorch loops over blocks of 4 rows
(as in ../correct/triton_tutorial_blocks.py), with the task's masks and scale=.
Bug: ``dk_blk = …`` where the kernel has ``+=``: each key block keeps only the last query block's
share of its gradient. dQ and dV are right.
"""
import math

import torch

BLOCK = 4


def _masked(s, attn_mask, is_causal, rows, cols):
    if attn_mask is not None:
        m = attn_mask[..., rows, cols]
        s = s.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else s + m
    if is_causal:
        r = torch.arange(rows.start, rows.stop)[:, None]
        c = torch.arange(cols.start, cols.stop)[None, :]
        s = s.masked_fill(c > r, float("-inf"))
    return s


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    sm_scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    L, S = query.shape[-2], key.shape[-2]
    s_full = _masked(query @ key.transpose(-2, -1) * sm_scale, attn_mask, is_causal, slice(0, L), slice(0, S))
    lse = torch.logsumexp(s_full, dim=-1, keepdim=True)
    delta = ((torch.exp(s_full - lse) @ value) * grad_out).sum(-1, keepdim=True)
    dq, dk, dv = torch.zeros_like(query), torch.zeros_like(key), torch.zeros_like(value)
    for start_n in range(0, S, BLOCK):
        cols = slice(start_n, min(start_n + BLOCK, S))
        k_blk, v_blk = key[..., cols, :], value[..., cols, :]
        dk_blk = torch.zeros_like(k_blk)
        for start_m in range(0, L, BLOCK):
            rows = slice(start_m, min(start_m + BLOCK, L))
            q_blk, do_blk = query[..., rows, :], grad_out[..., rows, :]
            p = torch.exp(_masked(q_blk @ k_blk.transpose(-2, -1) * sm_scale, attn_mask, is_causal, rows, cols)
                          - lse[..., rows, :])
            dv[..., cols, :] += p.transpose(-2, -1) @ do_blk
            ds = p * (do_blk @ v_blk.transpose(-2, -1) - delta[..., rows, :])
            dk_blk = ds.transpose(-2, -1) @ q_blk
            dq[..., rows, :] += ds @ k_blk
        dk[..., cols, :] = dk_blk
    return dq * sm_scale, dk * sm_scale, dv
