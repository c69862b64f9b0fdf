"""Task ``sdpa``'s part of the fingerprint of torch's fused kernel (``grader/checks/fingerprint.py``)."""
from __future__ import annotations

import torch

from ...checks.fingerprint import Fingerprint, flash


def _sdpa_builtin(args, kwargs) -> list:
    return [flash(*args, **kwargs)]


def sdpa_plain(args, kwargs) -> list:
    """Plain formulas in the inputs' own dtype: a sample where one rounds like the kernel proves nothing."""
    from reference_impl import scaled_dot_product_attention
    q, k, v = args
    out = [scaled_dot_product_attention(*args, **kwargs)]
    if not kwargs:
        out.append(torch.softmax(q @ k.transpose(-2, -1) / q.size(-1) ** 0.5, dim=-1) @ v)
    return out


# Ordinary-looking calls on which the fused kernel applies (it needs E = Ev; with E != Ev torch
# falls back to plain matmul and softmax, which proves nothing). One is drawn in float32 before
# the checks and one in float64 at the end (``fresh_samples``).
def sdpa_sample(ctx, dtype=torch.float32):
    r = ctx.inputs.randn
    B, H = ctx.inputs.distinct(2, 2, 5)
    L, S, E = ctx.inputs.distinct(3, 5, 24)
    return (r(B, H, L, E, dtype=dtype), r(B, H, S, E, dtype=dtype), r(B, H, S, E, dtype=dtype))


FINGERPRINT = Fingerprint(sample=sdpa_sample, builtin=_sdpa_builtin, plain=sdpa_plain)
