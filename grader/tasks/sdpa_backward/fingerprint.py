"""Task ``sdpa_backward``'s part of the fingerprint of torch's fused kernel (``grader/checks/fingerprint.py``)."""
from __future__ import annotations

import torch

from ...checks.fingerprint import Fingerprint, flash
from ..sdpa.fingerprint import sdpa_sample


def _backward_builtin(args, kwargs) -> list:
    """sdpa_backward through the kernel: its own backward (the fused one), by autograd here."""
    q, k, v, g = args
    leaves = [t.detach().clone().requires_grad_(True) for t in (q, k, v)]
    with torch.enable_grad():
        out = flash(*leaves, **kwargs)
        if out is None:
            return []
        return [tuple(torch.autograd.grad(out, leaves, g))]


def _backward_plain(args, kwargs) -> list:
    """Autograd through the plain formula (whose backward kernels honest code can match: softmax's
    is p * (g - (g * p).sum(-1))) and the chain rule as honest code writes it, in the inputs' dtype."""
    import math

    from .checks import reference_grads
    q, k, v, g = args
    mask, causal, scale = kwargs.get("attn_mask"), kwargs.get("is_causal", False), kwargs.get("scale")
    s = 1 / math.sqrt(q.size(-1)) if scale is None else scale
    scores = q @ k.transpose(-2, -1) * s
    if causal:
        scores = scores.masked_fill(~torch.ones(scores.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    p = torch.softmax(scores, dim=-1)
    d_p = g @ v.transpose(-2, -1)
    d_scores = p * (d_p - (d_p * p).sum(dim=-1, keepdim=True))
    by_hand = (d_scores @ k * s, d_scores.transpose(-2, -1) @ q * s, p.transpose(-2, -1) @ g)
    return [reference_grads(q, k, v, g, **kwargs), by_hand]


def _backward_sample(ctx, dtype=torch.float32):
    q, k, v = sdpa_sample(ctx, dtype)
    return (q, k, v, ctx.inputs.randn(*q.shape[:-1], v.size(-1), dtype=dtype))


FINGERPRINT = Fingerprint(sample=_backward_sample, builtin=_backward_builtin, plain=_backward_plain)
