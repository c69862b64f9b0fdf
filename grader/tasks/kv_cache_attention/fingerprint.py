"""Task ``kv_cache_attention``'s part of the fingerprint of torch's fused kernel (``grader/checks/fingerprint.py``)."""
from __future__ import annotations

import torch

from ...checks.fingerprint import Fingerprint, flash


def _appended(args):
    query, key, value, k_cache, v_cache, position = args
    kc, vc = k_cache.clone(), v_cache.clone()
    kc[:, position], vc[:, position] = key[:, 0], value[:, 0]
    return query, kc, vc, position


def _kv_builtin(args, kwargs) -> list:
    """The kernel over the cache's first position + 1 rows, on (B, 1, n, D) views (one head)."""
    query, kc, vc, position = _appended(args)
    out = flash(query[:, None], kc[:, None, :position + 1], vc[:, None, :position + 1])
    return [(out[:, 0], kc, vc)] if out is not None else []


def _kv_plain(args, kwargs) -> list:
    from .checks import reference
    return [reference(*args, dtype=args[0].dtype)]


def _kv_sample(ctx, dtype=torch.float32):
    r = ctx.inputs.randn
    B, N = ctx.inputs.randint(2, 4), ctx.inputs.randint(6, 9)
    D = Dv = ctx.inputs.randint(8, 24)  # the kernel needs E = Ev
    position = ctx.inputs.randint(2, N - 1)
    return (r(B, 1, D, dtype=dtype), r(B, 1, D, dtype=dtype), r(B, 1, Dv, dtype=dtype),
            r(B, N, D, dtype=dtype), r(B, N, Dv, dtype=dtype), position)


FINGERPRINT = Fingerprint(sample=_kv_sample, builtin=_kv_builtin, plain=_kv_plain)
