"""The GPU suite for the sdpa task: half-precision accuracy, and speed (reported, never graded).

``run_gpu_suite(session, device)`` calls the student's ``scaled_dot_product_attention``
through an open sandbox ``SandboxSession`` (made with ``device=device``: the child moves the inputs
there) and returns check dicts in the grade report's shape (``id``, ``passed``, ``points``,
``max_points``, ``message``, ``details``):

- ``gpu.float16`` / ``gpu.bfloat16`` (+ ``…_masked``, ``…_large_logits``): outputs and
  gradients against the float64 reference, with a dtype-aware allowance: a multiple of the
  error the reference itself makes when run in that dtype on the same device, plus the
  dtype's rounding floor (``grader.checks.tolerance``). A correct implementation passes in
  any dtype; overflow to inf/NaN (exp of unshifted float16 scores) and silent upcasts to
  float32 do not.
- ``gpu.timing``: median time of the submission, of the reference implementation and of torch's
  fused ``F.scaled_dot_product_attention`` on the same inputs, 0 points. The submission's time
  is measured from the trusted side around a sandbox call, so it includes moving the inputs
  and the output (as the reference's and torch's timings do: same-sized transfers, measured
  the same way); the child's own call time (synchronised on CUDA) is in the details.

``dtypes`` defaults to float16 and bfloat16; tests on a machine without a GPU pass
``dtypes=(torch.float32,)`` to exercise the same code on the CPU. Nothing here imports the web
app or a database.
"""
from __future__ import annotations

import statistics
import time

import torch
import torch.nn.functional as F

from reference_impl import scaled_dot_product_attention as reference_sdpa
from reference_impl import sdpa_float64

from .base import StudentFailure
from .tolerance import GRAD_MULTIPLIER, OUTPUT_MULTIPLIER, allowance, compare
from ..i18n import T

DTYPE_NAMES = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32",
               torch.float64: "float64"}
POINTS_PER_DTYPE_CHECK = 2.0
TIMING_REPEATS = 5


def run_gpu_suite(session, device: str | torch.device, *, dtypes=(torch.float16, torch.bfloat16),
                  seed: int = 0, points: float = POINTS_PER_DTYPE_CHECK,
                  timing: bool = True) -> list[dict]:
    """Run the half-precision checks and the timing on ``device``; returns check dicts."""
    device = torch.device(device)
    g = torch.Generator().manual_seed(seed)
    checks = []
    for dtype in dtypes:
        name = DTYPE_NAMES.get(dtype, str(dtype))
        # (B, H, L, S, E): rectangular so that swapped axes show; unit-variance inputs.
        checks.append(_accuracy_check(session, device, dtype, f"gpu.{name}", (2, 4, 33, 47, 32),
                                      g, masked=False, points=points))
        checks.append(_accuracy_check(session, device, dtype, f"gpu.{name}_masked",
                                      (2, 4, 33, 47, 32), g, masked=True, points=points))
        # Scaled scores around ±20: exp() of unshifted scores overflows float16 (max 65504).
        checks.append(_accuracy_check(session, device, dtype, f"gpu.{name}_large_logits",
                                      (2, 4, 33, 47, 32), g, masked=False, points=points,
                                      std=3.0))
    if timing:
        checks.append(_timing_check(session, device, dtypes[0], g))
    return checks


def _check(check_id, passed, points, max_points, message, details) -> dict:
    return {"id": check_id, "passed": bool(passed), "points": float(points if passed else 0.0),
            "max_points": float(max_points), "message": message, "details": details}


def _inputs(shape, dtype, g, masked, std=1.0):
    B, H, L, S, E = shape
    q, k = (std * torch.randn(B, H, n, E, generator=g) for n in (L, S))
    q, k, v = q.to(dtype), k.to(dtype), torch.randn(B, H, S, E, generator=g).to(dtype)
    mask = None
    if masked:  # a boolean padding mask broadcast over heads, no row fully masked
        keep = torch.rand(B, 1, L, S, generator=g) < 0.7
        keep[..., 0] = True
        mask = keep
    return q, k, v, mask


def _accuracy_check(session, device, dtype, check_id, shape, g, *, masked, points,
                    std=1.0) -> dict:
    name = DTYPE_NAMES.get(dtype, str(dtype))
    q, k, v, mask = _inputs(shape, dtype, g, masked, std)
    upstream = torch.randn(shape[0], shape[1], shape[2], shape[4], generator=g).to(dtype)
    kwargs = {"attn_mask": mask} if masked else {}
    what = T("{dtype} inputs{mask}{scores} on {device}", dtype=name,
             mask=T(" with a boolean mask") if masked else "",
             scores=T(" and large scores (std of q and k = {std:g})", std=std) if std != 1.0 else "",
             device=device.type)
    result = session.call(q, k, v, grad_output=upstream, wrt=(0, 1, 2), **kwargs)
    if not result.ok:
        return _check(check_id, False, 0, points, StudentFailure(result.error, what).describe(),
                      {"error_kind": result.error.kind})
    out = result.output
    if out is None:
        return _check(check_id, False, 0, points,
                      T("your function returned {kind} for {what}, not a tensor",
                        kind=result.output_type or T("nothing"), what=what), {})
    if out.dtype != dtype:
        return _check(check_id, False, 0, points,
                      T("for {what} your function returns {got}; it should return {dtype} like its "
                        "inputs (compute in higher precision inside if you like, then cast back)",
                        what=what, got=DTYPE_NAMES.get(out.dtype, out.dtype), dtype=name),
                      {"output_dtype": str(out.dtype)})

    # Trusted side, on the same device: the gold answer and the reference's own error in dtype.
    # Fresh leaves for each path (``.to`` returns the same tensor when nothing moves).
    qd, kd, vd = (t.detach().clone().to(device).requires_grad_() for t in (q, k, v))
    md = mask.to(device) if mask is not None else None
    gold = sdpa_float64(qd, kd, vd, md)
    gold.backward(upstream.to(device).double())
    q_same, k_same, v_same = (t.detach().clone().to(device).requires_grad_() for t in (q, k, v))
    same = reference_sdpa(q_same, k_same, v_same, md)
    same.backward(upstream.to(device))
    bound = allowance(gold.detach().cpu(), same.detach().cpu(), dtype, OUTPUT_MULTIPLIER)
    cmp = compare(out.cpu(), gold.detach().cpu(), bound)
    details = {"dtype": name, "masked": masked, "shape": list(shape), "input_std": std,
               "output": cmp.details()}
    if not cmp.ok:
        hint = (T(" In float16, exp() overflows above 11: subtract each row's maximum before "
                  "exponentiating.") if cmp.nonfinite and dtype == torch.float16 else "")
        return _check(check_id, False, 0, points, T("{what}: {comparison}.{cause}", what=what,
                                                    comparison=cmp.describe(), cause=hint), details)

    if result.grads is None:
        return _check(check_id, False, 0, points,
                      T("{what}: the output is right but gradients do not flow back to the inputs "
                        "({error})", what=what, error=result.grad_error or T("detached output")), details)
    for label, got, gold_t, same_t in zip(("query", "key", "value"), result.grads,
                                          (qd, kd, vd), (q_same, k_same, v_same)):
        if got is None:
            return _check(check_id, False, 0, points,
                          T("{what}: no gradient reaches the {name}", what=what, name=label), details)
        gbound = allowance(gold_t.grad.cpu(), same_t.grad.cpu(), dtype, GRAD_MULTIPLIER,
                           floor_factor=5.0)
        gcmp = compare(got.cpu(), gold_t.grad.cpu(), gbound)
        details[f"grad_{label}"] = gcmp.details()
        if not gcmp.ok:
            return _check(check_id, False, 0, points,
                          T("{what}: the gradient with respect to the {name} is off: {comparison}",
                            what=what, name=label, comparison=gcmp.describe()), details)
    return _check(check_id, True, points, points,
                  T("{what}: output and gradients within the {dtype} allowance (largest output error "
                    "{max_error:.2g}, allowed {bound:.2g})", what=what, dtype=name, max_error=cmp.max_error,
                    bound=bound), details)


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _median_seconds(run, repeats: int) -> float:
    run()  # warm-up: kernels, allocator, lazy imports
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _timing_check(session, device, dtype, g) -> dict:
    name = DTYPE_NAMES.get(dtype, str(dtype))
    shape = (4, 8, 1024, 1024, 64) if device.type == "cuda" else (1, 4, 128, 128, 32)
    q, k, v, _ = _inputs(shape, dtype, g, masked=False)
    child_times = []

    def submission():
        result = session.call(q, k, v, is_causal=True)
        if not result.ok:
            raise StudentFailure(result.error, T("timing with {dtype} inputs", dtype=name))
        child_times.append(result.elapsed)

    def trusted(fn):
        def run():  # the same transfers as a sandbox call: inputs to the device, output back
            out = fn(*(t.to(device) for t in (q, k, v)), is_causal=True)
            _sync(device)
            out.cpu()
        return run

    details = {"dtype": name, "shape": list(shape), "causal": True, "repeats": TIMING_REPEATS,
               "device": str(device)}
    try:
        ours = _median_seconds(submission, TIMING_REPEATS)
    except StudentFailure as exc:
        return _check("gpu.timing", True, 0, 0, T("not timed: {reason}", reason=exc.describe()), details)
    reference = _median_seconds(trusted(reference_sdpa), TIMING_REPEATS)
    fused = _median_seconds(trusted(F.scaled_dot_product_attention), TIMING_REPEATS)
    details.update({"submission_s": ours, "reference_s": reference, "torch_fused_s": fused,
                    "submission_call_s": statistics.median(child_times[1:] or child_times),
                    "vs_reference": ours / reference, "vs_torch_fused": ours / fused})
    B, H, L, S, E = shape
    return _check("gpu.timing", True, 0, 0,
                  T("speed, reported only ({dtype}, causal, B={B} H={H} L={L} E={E} on {device}): yours "
                    "{ours:.2f} ms, the reference {reference:.2f} ms, torch's fused SDPA {fused:.2f} ms "
                    "({vs_reference:.2f}x the reference, {vs_fused:.2f}x fused; includes moving inputs and "
                    "output)", dtype=name, B=B, H=H, L=L, E=E, device=device.type, ours=ours * 1e3,
                    reference=reference * 1e3, fused=fused * 1e3, vs_reference=ours / reference,
                    vs_fused=ours / fused), details)
