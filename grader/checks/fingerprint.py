"""The parent's fingerprint of torch's fused attention kernels (``forbidden.runtime`` reads it).

Torch's fused CPU kernel (``_scaled_dot_product_flash_attention_for_cpu``, which
``F.scaled_dot_product_attention``, ``nn.MultiheadAttention`` and ``nn.Transformer*`` reach on
4-D inputs) rounds in its own blockwise order: on inputs where the plain formulas round
differently, an output bit-for-bit the kernel's comes from the kernel, not from hand-written
attention (checked against every correct file of the corpora, ``tests/test_fingerprint.py``).

The parent recomputes the kernel on the very inputs of a call: in the dtype it was called with,
and with the inputs cast to every other floating dtype first and the result cast back (a child
that runs the kernel in float16 and returns float32, or float64 inputs through float32). The one
variant values cannot expose is the kernel run wider than the call (float32 inputs through
float64, cast back): its float32 result is the correctly rounded value an honest float64
computation also gives. The calls made in float64 catch that child, where the kernel runs on the
inputs as they are.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ..i18n import T
from .base import Fail, StudentFailure

@dataclass
class Fingerprint:
    """How ``forbidden.runtime`` recognises torch's fused kernel in a task's outputs (each task's
    part: ``grader/tasks/<id>/fingerprint.py``).

    ``sample(ctx, dtype)`` draws the arguments of an ordinary call on which the kernel applies;
    ``builtin(args, kwargs)`` lists the kernel's outputs on them, one per way torch computes the
    task with it (empty, or None entries, where it does not apply); ``plain(args, kwargs)`` lists
    plain formulas that may round like it (where one does, nothing is proved). Outputs are tensors,
    or tuples of them for a task that returns several.
    """
    sample: Callable
    builtin: Callable
    plain: Callable


# The dtypes the kernel may run in, whatever the call's, widest first.
KERNEL_DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)
# A candidate proves the kernel only where every plain formula misses it in at least this many
# elements: each is a rounding an honest implementation would have had to reproduce by chance.
MIN_EVIDENCE = 8


def flash(q, k, v, attn_mask=None, is_causal=False, scale=None):
    """torch's fused CPU kernel itself (not F.scaled_dot_product_attention, which may pick the math
    path: plain matmul and softmax, which honest code can match bit for bit)."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4 or q.device.type != "cpu":
        return None
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        attn_mask = torch.zeros(attn_mask.shape, dtype=q.dtype).masked_fill(~attn_mask, float("-inf"))
    q, k, v = torch.broadcast_tensors(q, k, v) if q.shape[:2] != k.shape[:2] else (q, k, v)
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        q, k, v, is_causal=is_causal, attn_mask=attn_mask, scale=scale)[0]


def fresh_samples(ctx, dtype=torch.float32) -> list:
    """One call on the task's fingerprint sample, in ``dtype``. One is taken in float32 before the
    other checks (``grading`` calls this first, so a submission that runs out of time still leaves
    one) and one in float64 at the end."""
    fingerprint = ctx.task.fingerprint
    if fingerprint is None:
        return []
    args = fingerprint.sample(ctx, dtype)
    try:
        result = ctx.call(*args, during=T("one more call with fresh inputs"))
    except StudentFailure as exc:
        ctx.fingerprint_unanswered |= exc.unanswered
        return []
    except Fail:
        return []
    return [(args, {}, result.output)] if _tensors(result.output) else []


def _tensors(value) -> list | None:
    """An output as a list of tensors (a task may return a tuple of them); None for anything else."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)) and value and all(isinstance(t, torch.Tensor) for t in value):
        return list(value)
    return None


def _cast(value, dtype):
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(dtype)
    if isinstance(value, (tuple, list)):
        return type(value)(_cast(v, dtype) for v in value)
    return value


def _call_dtype(args) -> torch.dtype | None:
    return next((a.dtype for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()), None)


def kernel_output(fingerprint, samples) -> bool:
    """Some (args, kwargs, output) of ``samples`` has an output (or one of its outputs) bit-for-bit
    torch's fused kernel's, run in any floating dtype on those inputs and cast back, on inputs
    where every plain formula in that dtype rounds differently in at least ``MIN_EVIDENCE``
    elements. A task without a fingerprint has none."""
    if fingerprint is None:
        return False
    for args, kwargs, out in samples:
        outs, dtype = _tensors(out), _call_dtype(args)
        if outs is None or dtype is None or sum(o.numel() for o in outs) < 64:
            continue
        for run_in in _kernel_dtypes(dtype, outs):
            try:
                if _matches(fingerprint, _cast(list(args), run_in), _cast(dict(kwargs), run_in), outs, dtype):
                    return True
            except (RuntimeError, ValueError, TypeError, IndexError):  # the kernel refuses these inputs
                continue
    return False


def _kernel_dtypes(dtype, outs) -> list:
    """The call's dtype, and each narrower one every output value is exact in (a result computed
    in float16 and cast back is; an honest one practically never): only there can the kernel
    have run. Wider ones are left out: rounded back they equal honest wide arithmetic."""
    narrower = KERNEL_DTYPES[KERNEL_DTYPES.index(dtype) + 1:] if dtype in KERNEL_DTYPES else ()
    return [dtype] + [d for d in narrower if all(torch.equal(o.to(d).to(o.dtype), o) for o in outs)]


def _matches(fingerprint, args, kwargs, outs, dtype) -> bool:
    plains = [_tensors(_cast(p, dtype)) for p in fingerprint.plain(args, kwargs)]
    for candidate in fingerprint.builtin(args, kwargs):
        candidate = _tensors(_cast(candidate, dtype)) if candidate is not None else None
        if candidate is None or len(candidate) != len(outs):
            continue
        for i, (got, kernel) in enumerate(zip(outs, candidate)):
            if got.shape != kernel.shape or got.dtype != kernel.dtype or not torch.equal(got, kernel):
                continue
            if all(p is not None and i < len(p) and p[i].shape == kernel.shape
                   and int((p[i] != kernel).sum()) >= MIN_EVIDENCE for p in plains):
                return True
    return False
