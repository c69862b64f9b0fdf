"""Task ``mha``'s part of the fingerprint of torch's fused kernel (``grader/checks/fingerprint.py``)."""
from __future__ import annotations

import torch

from ...checks.fingerprint import Fingerprint, flash


def _mha_builtin(args, kwargs) -> list:
    """The kernel between the four projections, with the projections as torch computes them:
    batch-first (``x @ Wᵀ``) or sequence-first (``F.multi_head_attention_forward``'s layout,
    where the same products round differently)."""
    if kwargs:
        return []
    x_q, x_kv, w_q, w_k, w_v, w_o, H = args
    B, L, D = x_q.shape
    split = lambda x: x.unflatten(-1, (H, D // H)).transpose(1, 2)  # (B, T, D) -> (B, H, T, d_k)
    out = []
    for lin in (lambda x, w: x @ w.T,
                lambda x, w: torch.nn.functional.linear(x.transpose(0, 1), w).transpose(0, 1)):
        heads = flash(split(lin(x_q, w_q)), split(lin(x_kv, w_k)), split(lin(x_kv, w_v)))
        if heads is not None:
            out.append(lin(heads.transpose(1, 2).reshape(B, L, D), w_o))
    return out


def _mha_plain(args, kwargs) -> list:
    from reference_impl import multi_head_attention
    return [multi_head_attention(*args, **kwargs)]


def _mha_sample(ctx, dtype=torch.float32):
    r = ctx.inputs.randn
    B, L, S = ctx.inputs.distinct(3, 2, 9)
    H, dk = ctx.inputs.randint(2, 4), ctx.inputs.randint(2, 6)
    D = H * dk
    return (r(B, L, D, dtype=dtype), r(B, S, D, dtype=dtype),
            *(r(D, D, std=D ** -0.5, dtype=dtype) for _ in range(4)), H)


FINGERPRINT = Fingerprint(sample=_mha_sample, builtin=_mha_builtin, plain=_mha_plain)
