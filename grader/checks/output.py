"""``output`` and ``dtype`` for sdpa: values against the float64 reference, and what comes back."""
from __future__ import annotations

import torch

from reference_impl import scaled_dot_product_attention
from .base import Fail
from .calls import run_sdpa, sdpa_out_shape
from ..i18n import N_, T, counted


def dims(ctx):
    """B, H in [2, 5]; L, S, E, Ev in [6, 16]: all six distinct."""
    B, H = ctx.inputs.distinct(2, 2, 5)
    L, S, E, Ev = ctx.inputs.distinct(4, 6, 16)
    return B, H, L, S, E, Ev


def _qkv(ctx, qb, kb, vb, L, S, E, Ev, dtype=torch.float32):
    r = ctx.inputs.randn
    return r(*qb, L, E, dtype=dtype), r(*kb, S, E, dtype=dtype), r(*vb, S, Ev, dtype=dtype)


def shapes(ctx):
    B, H, L, S, E, Ev = dims(ctx)
    worst = 0.0
    _, _, c = run_sdpa(ctx, *_qkv(ctx, (B, H), (B, H), (B, H), L, S, E, Ev),
                       what=T("4-D inputs (B={B}, H={H}, L={L}, S={S}, E={E}, Ev={Ev})",
                              B=B, H=H, L=L, S=S, E=E, Ev=Ev), heat=True)
    worst = max(worst, c.max_error)
    N, L2, S2, E2, Ev2 = ctx.inputs.distinct(5, 2, 13)
    _, _, c = run_sdpa(ctx, *_qkv(ctx, (N,), (N,), (N,), L2, S2, E2, Ev2),
                       what=T("3-D inputs (N={N}, L={L2}, S={S2}, E={E2}, Ev={Ev2})",
                              N=N, L2=L2, S2=S2, E2=E2, Ev2=Ev2))
    worst = max(worst, c.max_error)
    return T("matches the float64 reference on 3-D and 4-D inputs with L != S, E != Ev (max "
             "error {worst:.2g})", worst=worst)


def broadcast(ctx):
    B, H, L, S, E, Ev = dims(ctx)
    _, _, c = run_sdpa(ctx, *_qkv(ctx, (B, H), (1, H), (B, 1), L, S, E, Ev),
                       what=T("broadcast batch dims (query {B}x{H}, key 1x{H}, value {B}x1)", B=B, H=H), heat=True)
    return T("batch dimensions broadcast like torch.matmul (max error {max_error:.2g})", max_error=c.max_error)


def fresh(ctx):
    """The same shapes again with new values: a memoised answer shows up here."""
    B, H, L, S, E, Ev = dims(ctx)
    return no_stale_answers(lambda i: run_sdpa(ctx, *_qkv(ctx, (B, H), (B, H), (B, H), L, S, E, Ev),
                                               what=T("call {value} of 3 with the same shapes "
                                                      "and new values", value=i + 1))[0])


def no_stale_answers(run) -> str:
    """``output.fresh`` for any task: ``run(i)`` draws new values of the same shapes, calls and judges.

    A miss whose output equals an earlier call's output is a cached answer, said as such.
    """
    earlier = []
    for i in range(3):
        try:
            out = run(i)
        except Fail as miss:
            got = getattr(miss, "output", None)
            if got is not None and any(torch.equal(got, old) for old in earlier):
                raise Fail(T("call {value} with new values returned exactly the output of an "
                             "earlier call with the same shapes: your function reuses "
                             "(caches) old answers; compute every result from the inputs it "
                             "is given", value=i + 1), {**miss.details, "diagnosis": "stale"}) from None
            raise
        earlier.append(out)
    return T("three calls with the same shapes and fresh values all match (no stale answers)")


def float64(ctx):
    B, H, L, S, E, Ev = dims(ctx)
    _, _, c = run_sdpa(ctx, *_qkv(ctx, (B, H), (B, H), (B, H), L, S, E, Ev, dtype=torch.float64),
                       what=T("float64 inputs"))
    return T("float64 inputs give float64-accurate results (max error {max_error:.2g})", max_error=c.max_error)


# ---- dtype ----------------------------------------------------------------------------
def check_returned(ctx, result, expected_shape, dtype, ref=None) -> str:
    """Plain tensor, right shape, dtype and device, finite where ``ref`` is."""
    out = ctx.tensor_out(result, expected_shape)
    if result.output_type != "torch.Tensor":
        raise Fail(T("your function returned a {output_type}, not a plain torch.Tensor "
                     "(return the tensor itself, e.g. without wrapping it in a Parameter or "
                     "subclass)", output_type=result.output_type))
    if out.dtype != dtype:
        hint = (T(" (cast back with .to(query.dtype) if you compute in float64 inside)")
                if out.dtype == torch.float64 else T(" (part of your computation changes the dtype)"))
        raise Fail(T("for {value} inputs your output is {value2}{hint}",
                     value=str(dtype).replace('torch.', ''), value2=str(out.dtype).replace('torch.', ''), hint=hint),
                   {"output_dtype": str(out.dtype), "expected_dtype": str(dtype)})
    want = torch.device(ctx.device)
    got = torch.device(result.output_device or "cpu")
    if got.type != want.type:
        raise Fail(T("your output is on {got} but the inputs were on {want}: keep tensors on "
                     "the query's device (create new tensors with device=query.device)", got=got, want=want))
    if ref is not None:
        bad = torch.isfinite(ref) & ~torch.isfinite(out.double())
        if bad.any():
            n = int(bad.sum())
            raise Fail(counted(n, N_("{value} output value is NaN or infinite where the reference is finite"),
                               N_("{value} output values are NaN or infinite where the reference is finite"), value=n),
                       {"first_bad_index": [int(i) for i in bad.nonzero()[0]]})
    return T("a plain {value} tensor of shape {expected_shape} on {want}",
             value=str(dtype).replace('torch.', ''), expected_shape=tuple(expected_shape), want=want)


def dtype_case(dtype):
    def check(ctx):
        B, H, L, S, E, Ev = dims(ctx)
        q, k, v = _qkv(ctx, (B, H), (B, H), (B, H), L, S, E, Ev, dtype=dtype)
        result = ctx.call(q, k, v, during=T("{dtype} inputs", dtype=dtype))
        ref = scaled_dot_product_attention(q.double(), k.double(), v.double())
        return check_returned(ctx, result, sdpa_out_shape(q, k, v), dtype, ref)
    return check


def precision(ctx):
    """Reported only: float64 inputs computed in float64 throughout (the scored checks allow float32 constants)."""
    from reference_impl import scaled_dot_product_attention as reference
    B, H, L, S, E, Ev = dims(ctx)
    q, k, v = _qkv(ctx, (B, H), (B, H), (B, H), L, S, E, Ev, dtype=torch.float64)
    out = ctx.tensor_out(ctx.call(q, k, v, during=T("float64 precision")), sdpa_out_shape(q, k, v))
    return strict_float64(out, reference(q, k, v))


def strict_float64(out, ref):
    from .tolerance import STRICT_FLOAT64, compare
    scale = max(1.0, float(ref.abs().max()))
    cmp = compare(out, ref, STRICT_FLOAT64 * scale)
    if not cmp.ok and (cmp.nonfinite or cmp.max_error > 1e-4 * scale):
        # Far beyond float32 rounding: the result is wrong, which the scored checks report.
        raise Fail(T("not a precision problem: your float64 result differs from the "
                     "reference by {max_error:.2g}, so the output checks above say what is "
                     "wrong. Reported only, not scored", max_error=cmp.max_error), cmp.details())
    if not cmp.ok:
        raise Fail(T("your float64 result is only accurate to {max_error:.2g} (float64 "
                     "allows ~1e-15): part of your computation runs in float32, e.g. "
                     ".float() or torch.tensor(d_k) (float32 by default); use math.sqrt or "
                     "the input's dtype. Reported only, not scored", max_error=cmp.max_error), cmp.details())
    return T("float64 inputs are computed in full float64 precision (max error {max_error:.2g})",
             max_error=cmp.max_error)
