"""``scale``: the softmax temperature, read off the function's behaviour.

sdpa: with identity values the output *is* the weight matrix; its logarithm gives
the logits up to a per-row (and, for a wrong softmax axis, per-column) constant, and
regressing those on q·k gives the scale the submission really uses. Doing this for
d_k from 8 to 512 tells "no scaling" from "1/d_k" from "a constant that is only right
at d_k = 64". The within-row variance of the recovered logits is the chapter's
argument made visible: ≈ 1 with 1/√d_k, ≈ d_k without scaling.

mha: on dense random inputs with an invertible output projection, each head's weights
are read back from the output (``_mha_head_weights``) and fitted the same way. No probe
uses inputs a submission could recognise (identity or zero matrices).
"""
from __future__ import annotations

import math

import torch

from .base import Fail, heatmap
from .calls import sdpa_kwargs
from .inputs import weights_from
from .variants import STRUCTURAL
from ..i18n import N_, T

DKS = (8, 16, 32, 64, 128, 256, 512)


# How far a fitted scale may be from the right one. 1e-3 (relative) where the weights read back
# exactly; wider where the function's own rounding makes the read-out noisy (float16 arithmetic
# inside: a standard error of ~1e-4..1e-3), by SLOPE_SIGMAS standard errors of the fit, so such a
# function passes or fails on what it does, not on the draw. Never beyond 1 %: every named wrong
# scale is further from 1/√d_k than that at some d_k.
SLOPE_TOLERANCE, SLOPE_SIGMAS, SLOPE_TOLERANCE_MAX = 1e-3, 10.0, 1e-2


def fit_scale(weights: torch.Tensor, dots: torch.Tensor) -> tuple[float, float, float]:
    """(slope, R², within-row logit variance) of log(weights) against dots, both (L, S)."""
    return _fit(weights, dots)[:3]


def fit_scale_within(weights: torch.Tensor, dots: torch.Tensor) -> tuple[float, float, float]:
    """(slope, R², relative tolerance): how close the slope must be to the right scale (see
    ``SLOPE_TOLERANCE``)."""
    slope, r2, _, stderr = _fit(weights, dots)
    noise = SLOPE_SIGMAS * stderr / abs(slope) if slope else float("inf")
    return slope, r2, min(max(SLOPE_TOLERANCE, noise), SLOPE_TOLERANCE_MAX)


def _fit(weights: torch.Tensor, dots: torch.Tensor) -> tuple[float, float, float, float]:
    """``fit_scale`` and the slope's standard error."""
    w, x = weights.double(), dots.double()
    valid = torch.isfinite(w) & (w > 1e-9)  # read back through a pseudo-inverse: smaller is noise
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
        return float("nan"), 0.0, float("nan"), float("nan")
    slope = float((xc * yc).sum()) / denom
    resid = yc - slope * xc
    total = float((yc * yc).sum())
    r2 = 1.0 - float((resid * resid).sum()) / total if total > 0 else 0.0
    row_var = torch.where(valid, y - (y * valid).sum(-1, keepdim=True) / valid.sum(-1, keepdim=True).clamp(min=1),
                          torch.zeros_like(y))
    variance = float((row_var ** 2).sum() / (valid.sum() - valid.size(0)).clamp(min=1))
    # residual degrees of freedom: the entries less the row and column constants and the slope
    dof = max(1, int(valid.sum()) - valid.size(0) - valid.size(1))
    stderr = (float((resid * resid).sum()) / dof / denom) ** 0.5
    return slope, r2, variance, stderr


def _read_weights(ctx, d: int, L: int, S: int, width: int, scale=None):
    """The weights of one call at d_k = d, and the q·k they should be a softmax of.

    Queries and keys have std (1.44 / √d)^½, so even unscaled logits stay moderate and every
    weight is large enough to be read back from dense random values (see ``readout_values``);
    the logit variance is reported for unit-variance inputs (scale² · d_k), as in the chapter.
    """
    std = (1.44 / math.sqrt(d)) ** 0.5
    q = ctx.inputs.randn(1, 1, L, d, dtype=torch.float64, std=std)
    k = ctx.inputs.randn(1, 1, S, d, dtype=torch.float64, std=std)
    v = ctx.inputs.readout_values(1, 1, keys=S, width=width)
    result = ctx.call(q, k, v, during=T("a call at d_k={d}", d=d), **sdpa_kwargs(None, False, scale))
    out = ctx.tensor_out(result, (1, 1, L, v.size(-1)), f"the call at d_k={d}")
    return weights_from(out, v)[0, 0], (q @ k.transpose(-2, -1))[0, 0]


# What the read-out says for each named scale bug (``scale_bug``): the fitted pattern in a few words.
_FOUND = {
    "no_scale": N_("no scaling: the scores are not divided by √d_k"),
    "scale_dk": N_("1/d_k: you divide by d_k instead of √d_k"),
    "scale_sqrt_mult": N_("√d_k: you multiply by √d_k instead of dividing"),
    "scale_dmodel": N_("1/√d_model instead of per-head 1/√d_k"),
    "scale_dv": N_("1/√{width}, the values' last dimension: scale by 1/√(query.size(-1)), not "
                   "1/√(value.size(-1))"),
}


def name_scale(found: dict, heads: dict | None = None, value_width: int | None = None) -> str:
    """A student-facing name for a pattern of fitted scales {d_k: scale}; ``value_width``: the
    read-out values' last dimension, constant over the calls."""
    bug = scale_bug(found, heads, value_width)
    if bug in _FOUND:  # only the values' width has a number in it
        return T(_FOUND[bug], **({"width": value_width} if bug == "scale_dv" else {}))
    ds = sorted(found)
    values = [found[d] for d in ds]
    if all(abs(v - values[0]) <= 2e-3 * abs(values[0]) for v in values) and values[0] > 0:
        equiv = 1 / values[0] ** 2
        return T("a constant {value:.4g} (that is 1/√{equiv:.0f}), only right at d_k = {equiv:.0f}: "
                 "use 1/√(query.size(-1))", value=values[0], equiv=equiv)
    worst = max(ds, key=lambda d: abs(found[d] * math.sqrt(d) - 1))
    return T("scale {value:.4g} at d_k = {d_k} where 1/√d_k = {right:.4g}", value=found[worst], d_k=worst,
             right=1 / math.sqrt(worst))


def scale_bug(found: dict, heads: dict | None = None, value_width: int | None = None) -> str | None:
    """The named bug (a key of ``variants.BUGS``) a pattern of fitted scales is, if any."""
    ds = sorted(found)
    close = lambda a, b: abs(a - b) <= 2e-3 * abs(b)
    if all(close(found[d], 1.0) for d in ds):
        return "no_scale"
    if all(close(found[d], 1 / d) for d in ds):
        return "scale_dk"
    if all(close(found[d], math.sqrt(d)) for d in ds):
        return "scale_sqrt_mult"
    if all(close(found[d], 1 / (2 * d)) for d in ds):
        return "scale_precedence"
    if heads and all(close(found[d], 1 / math.sqrt(d * heads[d])) for d in ds) and any(heads[d] > 1 for d in ds):
        return "scale_dmodel"
    if value_width and all(close(found[d], 1 / math.sqrt(value_width)) for d in ds):
        return "scale_dv"
    if not heads and all(close(found[d], 1 / 8) for d in ds):
        return "scale_constant"
    return None


def sdpa_default(ctx):
    found, table, fits, row_sums, within = {}, [], {}, {}, {}
    L, S = ctx.inputs.distinct(2, 10, 18)
    width = ctx.inputs.readout_width(S)
    sample = None
    for d in DKS:
        w, dots = _read_weights(ctx, d, L, S, width)
        row_sums[d] = float(w.sum(-1).mean())
        slope, r2, within[d] = fit_scale_within(w, dots)
        if r2 < 0.999 or not math.isfinite(slope):
            raise Fail(T("could not read one softmax temperature from your weights at "
                         "d_k={d} (fit R² = {r2:.3f}): they are not softmax(c · q·k) over "
                         "the keys; see the weights and output checks", d=d, r2=r2),
                       {"d_k": d, "r2": r2, "weights_submission": heatmap(w),
                        "weights_reference": heatmap(torch.softmax(dots / math.sqrt(d), -1))})
        found[d] = slope
        fits[d] = r2
        table.append({"d_k": d, "variance": round(slope * slope * d, 4), "expected": 1.0,
                      "fitted_scale": float(f"{slope:.6g}"), "expected_scale": float(f"{1 / math.sqrt(d):.6g}")})
        if d == 64:
            sample, sample_ref = w, torch.softmax(dots / 8.0, dim=-1)
    details = {"variance_by_dk": table}
    ctx.attention_seen = True  # every read-out was softmax(c · q·k): attention, whatever its scale
    if all(abs(found[d] * math.sqrt(d) - 1) <= within[d] for d in DKS):
        return (T("the softmax temperature is 1/√d_k for d_k from 8 to 512; logit variance ≈ "
                  "{value:.2f} at d_k = 64 (≈ 1 as intended)", value=table[3]['variance']), details)
    details["weights_submission"], details["weights_reference"] = heatmap(sample), heatmap(sample_ref)
    if _post_scaled(row_sums):
        details["diagnosis"] = "scale_after_softmax"
        ctx.diagnoses.append("scale_after_softmax")
        raise Fail(T("your weights sum to 1/√d_k: you scale after the softmax; the 1/√d_k "
                     "belongs on the scores"), details)
    bug = scale_bug(found, value_width=width)
    if bug:
        details["diagnosis"] = bug
        ctx.diagnoses.append(bug)
    raise Fail(T("Scale found: {scale}. {variance}", scale=name_scale(found, value_width=width),
                 variance=_variance_sentence(table)), details)


def _variance_sentence(table: list) -> str:
    """The chapter's argument in numbers, at the d_k where the logit variance is furthest from 1."""
    worst = max(table, key=lambda row: abs(math.log(max(row["variance"], 1e-12))))
    tail = T(" (the softmax saturates)") if worst["variance"] > 4 else (
        T(" (the softmax is nearly uniform)") if worst["variance"] < 0.25 else "")
    return T("With unit-variance queries and keys the logits should have variance ≈ 1; yours have "
             "{variance:.3g} at d_k = {d_k}{tail}", variance=worst["variance"], d_k=worst["d_k"], tail=tail)


def sdpa_argument(ctx):
    d = 32
    given = ctx.inputs.uniform(0.3, 0.6) if ctx.inputs.randint(0, 1) else ctx.inputs.uniform(0.04, 0.1)
    L, S = ctx.inputs.distinct(2, 10, 18)
    w, dots = _read_weights(ctx, d, L, S, ctx.inputs.readout_width(S), scale=given)
    slope, r2, within = fit_scale_within(w, dots)
    details = {"scale_argument": round(given, 6), "fitted_scale": float(f"{slope:.6g}"), "d_k": d,
               # with scale= the logit variance is scale² · d_k, not 1: that is what the caller asked for
               "variance_by_dk": [{"d_k": d, "variance": round(slope * slope * d, 4),
                                   "expected": round(given ** 2 * d, 4)}]}
    if r2 >= 0.999 and abs(slope - given) <= within * given:
        return T("scale={given:.4g} is honoured (fitted {slope:.6g})", given=given, slope=slope), details
    if abs(float(w.sum(-1).mean()) - given) <= 1e-6:
        details["diagnosis"] = "scale_after_softmax"
        raise Fail(T("with scale={given:.4g}: your weights sum to {given:.4g}, not 1: you "
                     "multiply the weights by the scale after the softmax; it belongs on the "
                     "scores", given=given), details)
    if abs(slope - 1 / math.sqrt(d)) <= 1e-3 / math.sqrt(d):
        why = T("you ignore the scale= argument and always use 1/√d_k")
        details["diagnosis"] = "scale_ignored"
    elif abs(slope - given / math.sqrt(d)) <= 1e-3 * given / math.sqrt(d):
        why = T("you apply both scale= and 1/√d_k; when scale is given use only it")
        details["diagnosis"] = "scale_twice"
    elif abs(slope - 1 / given) <= 1e-3 / given:
        why = T("you divide by scale= instead of multiplying")
    elif abs(slope - 1) <= 1e-3:
        why = T("your function ignores scale= and does not scale the scores at all (the temperature found is 1)")
    else:
        why = T("your function does not multiply the scores by scale=: the temperature found is {slope:.4g}, "
                "not {given:.4g}", slope=slope, given=given)
    raise Fail(T("with scale={given:.4g} at d_k={d}: {why}", given=given, d=d, why=why), details)


# ---- mha ------------------------------------------------------------------------------
MHA_CONFIGS = ((4, 8), (2, 16), (8, 32), (2, 64), (4, 128), (2, 256))  # (heads, d_k)


# How a layer may apply its weights: as nn.Linear (x @ Wᵀ, the task's convention) or x @ W, with or
# without the output projection. The scale is read under whichever the layer follows, so a layout
# bug (charged by the output and heads checks) does not also cost the scale points.
LAYOUTS = ((True, True), (False, True), (True, False), (False, False))  # (transposed, output projection)


def _mha_head_weights(ctx, H: int, dk: int, L: int, S: int):
    """One call on dense random inputs; per layout, per head, the weights read back and their q·k.

    out = merge(heads) @ w_oᵀ, so merge(heads) = out @ (w_oᵀ)⁻¹; head h is A_h V_h with
    V_h = (x_kv @ w_vᵀ)[:, h] of full row rank (S ≤ d_k), so A_h = head_h @ pinv(V_h).
    """
    D = H * dk
    std = (1.2 / math.sqrt(dk)) ** 0.5  # unscaled logits stay moderate, so every weight reads back
    x_q = ctx.inputs.randn(1, L, D, dtype=torch.float64, std=std)
    x_kv = ctx.inputs.randn(1, S, D, dtype=torch.float64, std=std)
    # Dense Gaussian weights: invertible, and in float64 the read-back error (~1e-12) is far
    # below what the fit needs.
    w_q, w_k, w_v, w_o = (ctx.inputs.randn(D, D, dtype=torch.float64, std=D ** -0.5) for _ in range(4))
    result = ctx.call(x_q, x_kv, w_q, w_k, w_v, w_o, H, during=T("{H} heads of d_k={dk}", H=H, dk=dk))
    out = ctx.tensor_out(result, (1, L, D), f"{H} heads of d_k={dk}").double()[0]
    def layout(transposed, projected):
        lin = (lambda x, w: x @ w.T) if transposed else (lambda x, w: x @ w)
        merged = out if not projected else (torch.linalg.solve(w_o, out.T).T if transposed
                                            else torch.linalg.solve(w_o.T, out.T).T)
        q, k, v = lin(x_q[0], w_q), lin(x_kv[0], w_k), lin(x_kv[0], w_v)
        heads = []
        for h in range(H):
            cols = slice(h * dk, (h + 1) * dk)
            heads.append((merged[:, cols] @ torch.linalg.pinv(v[:, cols]), q[:, cols] @ k[:, cols].T))
        return heads

    return (layout(*which) for which in LAYOUTS)  # lazily: the first layout explains a correct layer


def _head_slopes(layouts) -> tuple[list, float, float]:
    """Each head's fitted scale under the first layout that explains every head (NaN if none does),
    the weights' mean row sum there (1 for a softmax; 1/√d_k if the scale came after it), and the
    widest relative tolerance of those fits (``SLOPE_TOLERANCE``)."""
    for heads in layouts:
        slopes, within = [], SLOPE_TOLERANCE
        for weights, dots in heads:
            slope, r2, tolerance = fit_scale_within(weights, dots)
            slopes.append(slope if r2 >= 0.999 else float("nan"))
            within = max(within, tolerance)
        if all(math.isfinite(x) for x in slopes):
            return slopes, float(torch.stack([w.sum(-1).mean() for w, _ in heads]).mean()), within
    return [float("nan")], float("nan"), SLOPE_TOLERANCE


def _post_scaled(row_sums: dict) -> bool:
    """Rows summing to 1/√d_k at every d_k: the scale multiplies the weights, after the softmax."""
    return all(abs(total * math.sqrt(d) - 1) <= 1e-6 for d, total in row_sums.items()) and \
        any(d > 1 for d in row_sums)


def mha_default(ctx):
    found, heads_of, table, row_sums, within = {}, {}, [], {}, {}
    L, S = 8, 6
    for H, dk in MHA_CONFIGS:
        slopes, row_sums[dk], within[dk] = _head_slopes(_mha_head_weights(ctx, H, dk, L, S))
        slopes_t = torch.tensor(slopes)
        slope = float(slopes_t.median())
        spread = float(slopes_t.max() - slopes_t.min())
        if not torch.isfinite(slopes_t).all() or not spread <= within[dk] * abs(slope) + 1e-9:
            details = {"num_heads": H, "d_k": dk}
            cause = next((b for b in ctx.diagnoses if b in STRUCTURAL), None)
            if cause:  # the heads are scrambled, so no head's weights can be read: that bug's doing
                details["diagnosis"] = cause
            raise Fail(T("could not read one temperature per head with {H} heads of "
                         "d_k={dk}: your heads do not behave like softmax(c · q·k) over "
                         "their own slice (check how you split heads; see the heads check)", H=H, dk=dk), details)
        found[dk], heads_of[dk] = slope, H
        table.append({"d_k": dk, "num_heads": H, "variance": round(slope * slope * dk, 4), "expected": 1.0,
                      "fitted_scale": float(f"{slope:.6g}"), "expected_scale": float(f"{1 / math.sqrt(dk):.6g}")})
    ctx.attention_seen = True  # every head's read-out was softmax(c · q·k)
    details = {"variance_by_dk": table,
               "variance_note": "scale² · d_k: the logit variance for unit-variance queries and keys"}
    if all(abs(found[d] * math.sqrt(d) - 1) <= within[d] for d in found):
        return T("every head uses 1/√d_k (d_k from 8 to 256), so logit variance ≈ 1"), details
    if _post_scaled(row_sums):
        details["diagnosis"] = "scale_after_softmax"
        ctx.diagnoses.append("scale_after_softmax")
        raise Fail(T("your weights sum to 1/√d_k in every head: you scale after the softmax; "
                     "the 1/√d_k belongs on the scores"), details)
    bug = scale_bug(found, heads_of)
    if bug:
        details["diagnosis"] = bug
        ctx.diagnoses.append(bug)
    raise Fail(T("Scale found: {value}. {value2}",
                 value=name_scale(found, heads_of), value2=_variance_sentence(table)), details)
