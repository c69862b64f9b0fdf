"""``scale``: the softmax temperature, read off the function's behaviour.

sdpa: with identity values the output *is* the weight matrix; its logarithm gives
the logits up to a per-row (and, for a wrong softmax axis, per-column) constant, and
regressing those on q·k gives the scale the submission really uses. Doing this for
d_k from 8 to 512 tells "no scaling" from "1/d_k" from "a constant that is only right
at d_k = 64". The within-row variance of the recovered logits is the chapter's
argument made visible: ≈ 1 with 1/√d_k, ≈ d_k without scaling.

mha: per head, two keys (0 and e₁) and queries t·e₁ make the weight of key 1
sigmoid(scale · t), so logit(weight) / t is each head's scale.
"""
from __future__ import annotations

import math

import torch

from .base import Fail, heatmap
from .calls import sdpa_kwargs

DKS = (8, 16, 32, 64, 128, 256, 512)


def fit_scale(weights: torch.Tensor, dots: torch.Tensor) -> tuple[float, float, float]:
    """(slope, R², within-row logit variance) of log(weights) against dots, both (L, S)."""
    w, x = weights.double(), dots.double()
    valid = torch.isfinite(w) & (w > 1e-300)
    y = torch.log(torch.where(valid, w, torch.ones_like(w)))
    # Remove per-row and per-column constants (alternating projections over the valid entries):
    # softmax over the keys adds a row constant, a softmax over the wrong axis a column one.
    xc = torch.where(valid, x, torch.zeros_like(x))
    yc = torch.where(valid, y, torch.zeros_like(y))
    rows, cols = valid.sum(-1, keepdim=True).clamp(min=1), valid.sum(-2, keepdim=True).clamp(min=1)
    for _ in range(50 if not valid.all() else 1):
        for t in (xc, yc):
            t -= torch.where(valid, t.sum(-1, keepdim=True) / rows, torch.zeros_like(t))
            t -= torch.where(valid, t.sum(-2, keepdim=True) / cols, torch.zeros_like(t))
    denom = float((xc * xc).sum())
    if denom == 0 or valid.sum() < 4:
        return float("nan"), 0.0, float("nan")
    slope = float((xc * yc).sum()) / denom
    resid = yc - slope * xc
    total = float((yc * yc).sum())
    r2 = 1.0 - float((resid * resid).sum()) / total if total > 0 else 0.0
    row_var = torch.where(valid, y - (y * valid).sum(-1, keepdim=True) / valid.sum(-1, keepdim=True).clamp(min=1),
                          torch.zeros_like(y))
    variance = float((row_var ** 2).sum() / (valid.sum() - valid.size(0)).clamp(min=1))
    return slope, r2, variance


def _read_weights(ctx, d: int, L: int, S: int, scale=None):
    q = ctx.inputs.randn(1, 1, L, d, dtype=torch.float64)
    k = ctx.inputs.randn(1, 1, S, d, dtype=torch.float64)
    eye = torch.eye(S, dtype=torch.float64).reshape(1, 1, S, S)
    result = ctx.call(q, k, eye, during=f"scale probe at d_k={d}", **sdpa_kwargs(None, False, scale))
    w = ctx.tensor_out(result, (1, 1, L, S), f"the scale probe at d_k={d}")[0, 0]
    return w, (q @ k.transpose(-2, -1))[0, 0]


def name_scale(found: dict, heads: dict | None = None) -> str:
    """A student-facing name for a pattern of fitted scales {d_k: scale}."""
    ds = sorted(found)
    close = lambda a, b: abs(a - b) <= 2e-3 * abs(b)
    if all(close(found[d], 1.0) for d in ds):
        return "no scaling: the scores are not divided by √d_k"
    if all(close(found[d], 1 / d) for d in ds):
        return "1/d_k: you divide by d_k instead of √d_k"
    if all(close(found[d], math.sqrt(d)) for d in ds):
        return "√d_k: you multiply by √d_k instead of dividing"
    if heads and all(close(found[d], 1 / math.sqrt(d * heads[d])) for d in ds) and any(heads[d] > 1 for d in ds):
        return "1/√d_model instead of per-head 1/√d_k"
    values = [found[d] for d in ds]
    if all(close(v, values[0]) for v in values) and values[0] > 0:
        equiv = 1 / values[0] ** 2
        return (f"a constant {values[0]:.4g} (that is 1/√{equiv:.0f}), only right at d_k = {equiv:.0f}: "
                f"use 1/√(query.size(-1))")
    worst = max(ds, key=lambda d: abs(found[d] * math.sqrt(d) - 1))
    return f"scale {found[worst]:.4g} at d_k = {worst} where 1/√d_k = {1 / math.sqrt(worst):.4g}"


def sdpa_default(ctx):
    found, table, fits = {}, [], {}
    L, S = 12, 16
    sample = None
    for d in DKS:
        w, dots = _read_weights(ctx, d, L, S)
        slope, r2, variance = fit_scale(w, dots)
        if r2 < 0.999 or not math.isfinite(slope):
            raise Fail(f"could not read one softmax temperature from your weights at d_k={d} (fit R² = "
                       f"{r2:.3f}): they are not softmax(c · q·k) over the keys; see the weights and "
                       f"output checks", {"d_k": d, "r2": r2, "weights_submission": heatmap(w),
                                          "weights_reference": heatmap(torch.softmax(dots / math.sqrt(d), -1))})
        found[d] = slope
        fits[d] = r2
        table.append({"d_k": d, "variance": round(variance, 4), "expected": 1.0,
                      "fitted_scale": float(f"{slope:.6g}"), "expected_scale": float(f"{1 / math.sqrt(d):.6g}")})
        if d == 64:
            sample, sample_ref = w, torch.softmax(dots / 8.0, dim=-1)
    details = {"variance_by_dk": table}
    if all(abs(found[d] * math.sqrt(d) - 1) <= 1e-3 for d in DKS):
        return ("the softmax temperature is 1/√d_k for d_k from 8 to 512; logit variance ≈ "
                f"{table[3]['variance']:.2f} at d_k = 64 (≈ 1 as intended)", details)
    details["weights_submission"], details["weights_reference"] = heatmap(sample), heatmap(sample_ref)
    raise Fail(f"Scale found: {name_scale(found)}. {_variance_sentence(table)}", details)


def _variance_sentence(table: list) -> str:
    """The chapter's argument in numbers, at the d_k where the logit variance is furthest from 1."""
    worst = max(table, key=lambda row: abs(math.log(max(row["variance"], 1e-12))))
    tail = " (the softmax saturates)" if worst["variance"] > 4 else (
        " (the softmax is nearly uniform)" if worst["variance"] < 0.25 else "")
    return (f"With unit-variance queries and keys the logits should have variance ≈ 1; yours have "
            f"{worst['variance']:.3g} at d_k = {worst['d_k']}{tail}")


def sdpa_argument(ctx):
    d = 32
    given = ctx.inputs.uniform(0.3, 0.6) if ctx.inputs.randint(0, 1) else ctx.inputs.uniform(0.04, 0.1)
    w, dots = _read_weights(ctx, d, 12, 16, scale=given)
    slope, r2, variance = fit_scale(w, dots)
    details = {"scale_argument": round(given, 6), "fitted_scale": float(f"{slope:.6g}"), "d_k": d,
               # with scale= the logit variance is scale² · d_k, not 1: that is what the caller asked for
               "variance_by_dk": [{"d_k": d, "variance": round(variance, 4), "expected": round(given ** 2 * d, 4)}]}
    if r2 >= 0.999 and abs(slope - given) <= 1e-3 * given:
        return f"scale={given:.4g} is honoured (fitted {slope:.6g})", details
    if abs(slope - 1 / math.sqrt(d)) <= 1e-3 / math.sqrt(d):
        why = "you ignore the scale= argument and always use 1/√d_k"
    elif abs(slope - given / math.sqrt(d)) <= 1e-3 * given / math.sqrt(d):
        why = "you apply both scale= and 1/√d_k; when scale is given use only it"
    elif abs(slope - 1 / given) <= 1e-3 / given:
        why = "you divide by scale= instead of multiplying"
    else:
        why = f"the temperature found is {slope:.4g}"
    raise Fail(f"with scale={given:.4g} at d_k={d}: {why}", details)


# ---- mha ------------------------------------------------------------------------------
MHA_CONFIGS = ((4, 8), (2, 16), (8, 32), (2, 64), (4, 128), (2, 256))  # (heads, d_k)


def mha_default(ctx):
    found, heads_of, table = {}, {}, []
    L = 8
    t = torch.linspace(-3, 3, L, dtype=torch.float64)
    for H, dk in MHA_CONFIGS:
        D = H * dk
        x_q = torch.zeros(1, L, D, dtype=torch.float64)
        x_kv = torch.zeros(1, 2, D, dtype=torch.float64)
        for h in range(H):
            x_q[0, :, h * dk] = t[ctx.inputs.perm(L)]
            x_kv[0, 1, h * dk] = 1.0
        eye = torch.eye(D, dtype=torch.float64)
        result = ctx.call(x_q, x_kv, eye, eye, eye, eye, H, during=f"scale probe, {H} heads of d_k={dk}")
        out = ctx.tensor_out(result, (1, L, D), f"the scale probe with {H} heads of d_k={dk}")
        w1 = out[0, :, ::dk].double()                    # (L, H): weight on key 1, per head
        tq = x_q[0, :, ::dk]
        ok = (w1 > 1e-12) & (w1 < 1 - 1e-12) & (tq.abs() > 0.1)
        logits = torch.log(w1.clamp(1e-300) / (1 - w1).clamp(1e-300))
        slopes = (logits[ok] / tq[ok]) if ok.any() else torch.tensor([float("nan")])
        spread = float(slopes.max() - slopes.min()) if ok.any() else float("nan")
        slope = float(slopes.median())
        if not math.isfinite(slope) or not spread <= 1e-3 * abs(slope) + 1e-9:
            raise Fail(f"could not read one temperature per head with {H} heads of d_k={dk}: your heads "
                       f"do not behave like softmax(c · q·k) over their own slice (check how you split "
                       f"heads; see the heads check)", {"num_heads": H, "d_k": dk})
        found[dk], heads_of[dk] = slope, H
        table.append({"d_k": dk, "num_heads": H, "variance": round(slope * slope * dk, 4), "expected": 1.0,
                      "fitted_scale": float(f"{slope:.6g}"), "expected_scale": float(f"{1 / math.sqrt(dk):.6g}")})
    details = {"variance_by_dk": table,
               "variance_note": "scale² · d_k: the logit variance for unit-variance queries and keys"}
    if all(abs(found[d] * math.sqrt(d) - 1) <= 1e-3 for d in found):
        return "every head uses 1/√d_k (d_k from 8 to 256), so logit variance ≈ 1", details
    raise Fail(f"Scale found: {name_scale(found, heads_of)}. {_variance_sentence(table)}", details)
