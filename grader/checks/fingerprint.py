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

import torch

from ..i18n import T
from ..tasks import Fingerprint
from .base import Fail, StudentFailure

# The dtypes the kernel may run in, whatever the call's, widest first.
KERNEL_DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)
# A candidate proves the kernel only where every plain formula misses it in at least this many
# elements: each is a rounding an honest implementation would have had to reproduce by chance.
MIN_EVIDENCE = 8


def _flash(q, k, v, attn_mask=None, is_causal=False, scale=None):
    """torch's fused CPU kernel itself (not F.scaled_dot_product_attention, which may pick the math
    path: plain matmul and softmax, which honest code can match bit for bit)."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4 or q.device.type != "cpu":
        return None
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        attn_mask = torch.zeros(attn_mask.shape, dtype=q.dtype).masked_fill(~attn_mask, float("-inf"))
    q, k, v = torch.broadcast_tensors(q, k, v) if q.shape[:2] != k.shape[:2] else (q, k, v)
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        q, k, v, is_causal=is_causal, attn_mask=attn_mask, scale=scale)[0]


def _sdpa_builtin(args, kwargs) -> list:
    return [_flash(*args, **kwargs)]


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
        heads = _flash(split(lin(x_q, w_q)), split(lin(x_kv, w_k)), split(lin(x_kv, w_v)))
        if heads is not None:
            out.append(lin(heads.transpose(1, 2).reshape(B, L, D), w_o))
    return out


def _keys(lengths, n):
    """(B, 1, 1, n): True where position j < length is a real one."""
    return (torch.arange(n)[None, :] < lengths[:, None])[:, None, None, :]


def _decoder_builtin(args, kwargs) -> list:
    """decoder_attention's two attentions, each through the kernel on (B, 1, T, D) inputs."""
    target, memory, t_len, m_len = args
    T_, S = target.size(1), memory.size(1)
    rows = _keys(t_len, T_)[:, 0, 0, :, None]  # (B, T, 1)
    zero = torch.zeros((), dtype=target.dtype)
    causal = torch.ones(T_, T_, dtype=torch.bool).tril()
    x, mem = target[:, None], memory[:, None]
    self_out = _flash(x, x, x, attn_mask=_keys(t_len, T_) & causal)[:, 0]
    self_out = torch.where(rows, self_out, zero)
    cross = _flash(self_out[:, None], mem, mem, attn_mask=_keys(m_len, S).expand(-1, 1, T_, S))[:, 0]
    return [(self_out, torch.where(rows, cross, zero))]


def _backward_builtin(args, kwargs) -> list:
    """sdpa_backward through the kernel: its own backward (the fused one), by autograd here."""
    q, k, v, g = args
    leaves = [t.detach().clone().requires_grad_(True) for t in (q, k, v)]
    with torch.enable_grad():
        out = _flash(*leaves, **kwargs)
        if out is None:
            return []
        return [tuple(torch.autograd.grad(out, leaves, g))]


def _backward_plain(args, kwargs) -> list:
    """Autograd through the plain formula (whose backward kernels honest code can match: softmax's
    is p * (g - (g * p).sum(-1))) and the chain rule as honest code writes it, in the inputs' dtype."""
    import math

    from ..tasks.sdpa_backward.checks import reference_grads
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


def _sdpa_plain(args, kwargs) -> list:
    """Plain formulas in the inputs' own dtype: a sample where one rounds like the kernel proves nothing."""
    from reference_impl import scaled_dot_product_attention
    q, k, v = args
    out = [scaled_dot_product_attention(*args, **kwargs)]
    if not kwargs:
        out.append(torch.softmax(q @ k.transpose(-2, -1) / q.size(-1) ** 0.5, dim=-1) @ v)
    return out


def _mha_plain(args, kwargs) -> list:
    from reference_impl import multi_head_attention
    return [multi_head_attention(*args, **kwargs)]


def _decoder_plain(args, kwargs) -> list:
    from ..tasks.decoder_attention.checks import reference
    target = args[0]
    return [reference(*args, dtype=target.dtype)]


# Ordinary-looking calls on which the fused kernel applies (it needs E = Ev; with E != Ev torch
# falls back to plain matmul and softmax, which proves nothing). One is drawn in float32 before
# the checks and one in float64 at the end (``fresh_samples``).
def _sdpa_sample(ctx, dtype=torch.float32):
    r = ctx.inputs.randn
    B, H = ctx.inputs.distinct(2, 2, 5)
    L, S, E = ctx.inputs.distinct(3, 5, 24)
    return (r(B, H, L, E, dtype=dtype), r(B, H, S, E, dtype=dtype), r(B, H, S, E, dtype=dtype))


def _mha_sample(ctx, dtype=torch.float32):
    r = ctx.inputs.randn
    B, L, S = ctx.inputs.distinct(3, 2, 9)
    H, dk = ctx.inputs.randint(2, 4), ctx.inputs.randint(2, 6)
    D = H * dk
    return (r(B, L, D, dtype=dtype), r(B, S, D, dtype=dtype),
            *(r(D, D, std=D ** -0.5, dtype=dtype) for _ in range(4)), H)


def _backward_sample(ctx, dtype=torch.float32):
    q, k, v = _sdpa_sample(ctx, dtype)
    return (q, k, v, ctx.inputs.randn(*q.shape[:-1], v.size(-1), dtype=dtype))


def _decoder_sample(ctx, dtype=torch.float32):
    from ..tasks.decoder_attention.checks import lengths
    r = ctx.inputs.randn
    B = ctx.inputs.randint(3, 5)
    T_, S, D = ctx.inputs.distinct(3, 5, 16)
    return (r(B, T_, D, dtype=dtype), r(B, S, D, dtype=dtype), lengths(ctx, B, T_), lengths(ctx, B, S))


SDPA_FINGERPRINT = Fingerprint(sample=_sdpa_sample, builtin=_sdpa_builtin, plain=_sdpa_plain)
# tiled_attention(query, key, value, block_size): the same kernel on the first three arguments.
TILED_FINGERPRINT = Fingerprint(sample=lambda ctx, dtype=torch.float32: (*_sdpa_sample(ctx, dtype),
                                                                        ctx.inputs.randint(2, 6)),
                                builtin=lambda args, kwargs: [_flash(*args[:3])],
                                plain=lambda args, kwargs: _sdpa_plain(args[:3], {}))
MHA_FINGERPRINT = Fingerprint(sample=_mha_sample, builtin=_mha_builtin, plain=_mha_plain)
DECODER_FINGERPRINT = Fingerprint(sample=_decoder_sample, builtin=_decoder_builtin, plain=_decoder_plain)
BACKWARD_FINGERPRINT = Fingerprint(sample=_backward_sample, builtin=_backward_builtin, plain=_backward_plain)


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
