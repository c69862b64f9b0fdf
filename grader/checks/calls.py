"""Calling a submission on one case and judging its output against the reference.

``run_sdpa`` / ``run_mha`` are what most checks use: call the student in the child,
compute the float64 and same-dtype references here in the parent, compare with the
tolerance rule, and on a miss work out the likely cause (a known buggy variant,
half-precision rounding, randomness such as dropout) before failing.
"""
from __future__ import annotations

import torch

from reference_impl import attention_weights, multi_head_attention, scaled_dot_product_attention
from ..i18n import T
from .base import Fail, broadcast_shapes, heatmap, shape_str
from .inputs import weights_from
from .tolerance import allowance, compare, relative_error
from .variants import explain, identify, mha_variants, sdpa_variants


def _mask_kind(attn_mask, is_causal) -> str:
    if is_causal:
        return "is_causal=True"
    if attn_mask is None:
        return "no mask"
    kind = "boolean" if attn_mask.dtype == torch.bool else "float (additive)"
    return f"{kind} mask of shape {tuple(attn_mask.shape)}"


def _up(t):
    return None if t is None else (t.double() if t.is_floating_point() else t)


def _half(t):
    return t if t is None or t.dtype == torch.bool else t.half()


def sdpa_kwargs(attn_mask, is_causal, scale) -> dict:
    """Only non-default keywords are passed, so an extra parameter like dropout_p is harmless."""
    kwargs = {}
    if attn_mask is not None:
        kwargs["attn_mask"] = attn_mask
    if is_causal:
        kwargs["is_causal"] = True
    if scale is not None:
        kwargs["scale"] = scale
    return kwargs


def sdpa_out_shape(q, k, v) -> tuple:
    batch = broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    return tuple(batch) + (q.size(-2), v.size(-1))


def run_sdpa(ctx, q, k, v, attn_mask=None, is_causal=False, scale=None, *, what: str,
             heat: bool = False):
    """Call, compare, diagnose. Returns (output, float64 reference, comparison)."""
    result = ctx.call(q, k, v, during=what, **sdpa_kwargs(attn_mask, is_causal, scale))
    out = ctx.tensor_out(result, sdpa_out_shape(q, k, v), what)
    ref64 = scaled_dot_product_attention(_up(q), _up(k), _up(v), _up(attn_mask), is_causal=is_causal,
                                         scale=scale)
    same = scaled_dot_product_attention(q, k, v, attn_mask, is_causal=is_causal, scale=scale)
    cmp = compare(out, ref64, allowance(ref64, same, q.dtype))
    if cmp.ok:
        ctx.attention_seen = True
        return out, ref64, cmp
    details = {"case": what, "shapes": f"query {shape_str(q)}, key {shape_str(k)}, value {shape_str(v)}",
               "dtype": str(q.dtype).replace("torch.", ""), "mask": _mask_kind(attn_mask, is_causal),
               **cmp.details()}
    if scale is not None:
        details["scale_argument"] = scale
    cause = diagnose(ctx, out, ref64, sdpa_variants(q, k, v, attn_mask, is_causal, scale), cmp,
                     lambda: ctx.call(q, k, v, during=what, **sdpa_kwargs(attn_mask, is_causal, scale)),
                     lambda: scaled_dot_product_attention(q.half(), k.half(), v.half(), _half(attn_mask),
                                                          is_causal=is_causal, scale=scale),
                     details)
    if heat and q.size(-2) <= 16 and k.size(-2) <= 16:
        details.update(weights_maps(ctx, q, k, attn_mask, is_causal, scale))
    fail = Fail(cmp.failure(what, cause), details)
    fail.output = out  # for checks that compare with earlier calls (stale answers)
    raise fail


def record_bug(ctx, name: str, details: dict) -> None:
    """``name`` is this failure's bug, and one of the bugs named so far in this grading."""
    details["diagnosis"] = name
    if name not in ctx.diagnoses:
        ctx.diagnoses.append(name)


def diagnose(ctx, out, ref64, variants, cmp, recall, half_ref, details) -> str:
    """A student-facing sentence for why ``out`` missed ``ref64`` (may be empty)."""
    ref_error = relative_error(out, ref64)
    name = identify(out, variants, ref_error, allow_all_nan=ctx.attention_seen, prefer=ctx.diagnoses)
    if name:
        record_bug(ctx, name, details)
        ctx.attention_seen = True  # attention with a known bug is still attention
        return explain(name)
    try:  # same inputs twice: a different answer means randomness (dropout left on, say)
        # Once the parent has seen two answers to one input, the function is random, and a later
        # miss is that bug too: where the weights are nearly one-hot (logits in the thousands),
        # dropout may leave both answers alike, and the verdict moved with the draw.
        random = "nondeterministic" in ctx.diagnoses
        if not random:
            again = recall().output
            random = again is not None and again.shape == out.shape and not _same_values(again, out)
        if random:
            record_bug(ctx, "nondeterministic", details)
            return explain("nondeterministic")
    except Exception:  # the cause stays unnamed; the failure itself is already reported
        pass
    if out.dtype == torch.float32 and cmp.nonfinite == 0 and ref_error < 0.05:
        try:
            half = half_ref()
            half_err = relative_error(half, ref64) if half is not None else 0.0
        except RuntimeError:  # float16 kernels missing on this CPU
            half_err = 0.0
        if half_err and ref_error < 10 * half_err:
            details["diagnosis"] = "low_precision"
            return explain("low_precision")
    if out.dtype == torch.float64 and cmp.nonfinite == 0 and ref_error < 1e-4:
        details["diagnosis"] = "float32_precision"
        return explain("float32_precision")
    if cmp.nonfinite and str(details.get("mask", "")).startswith("float"):
        details["diagnosis"] = "float_mask_not_added"
        return T("NaN or inf where the reference is finite, with a float mask: a float mask is "
                 "added to the scaled scores (scores + mask), so a -inf entry gives that key "
                 "weight 0; multiplying by it, or applying it after the softmax, gives NaN")
    if cmp.nonfinite:
        return T("NaN or inf in your output: look for exp() of large numbers, 0/0, or log(0)")
    return ""


def _same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal, counting NaN as equal to NaN: a deterministic NaN is not randomness."""
    return bool(((a == b) | (a.isnan() & b.isnan())).all())


def weights_maps(ctx, q, k, attn_mask, is_causal, scale) -> dict:
    """The submission's weights for the heatmap, read back from one extra call (see ``readout_values``)."""
    S = k.size(-2)
    batch = broadcast_shapes(q.shape[:-2], k.shape[:-2])
    values = ctx.inputs.readout_values(*batch, keys=S).to(q.dtype)
    ref = attention_weights(_up(q), _up(k), _up(attn_mask), is_causal, scale)
    maps = {"weights_reference": heatmap(ref)}
    try:
        res = ctx.call(q, k, values, during=T("reading out the weights"), **sdpa_kwargs(attn_mask, is_causal, scale))
        if res.output is not None and res.output.shape[:-1] == ref.shape[:-1] \
                and res.output.shape[-1] == values.size(-1):
            maps["weights_submission"] = heatmap(weights_from(res.output, values))
    except Exception:  # the heatmap is an extra; the check's verdict does not depend on it
        pass
    return maps


def run_mha(ctx, x_q, x_kv, ws, num_heads, attn_mask=None, is_causal=False, *, what: str,
            wrt=(), grad_output=None):
    kwargs = {}
    if attn_mask is not None:
        kwargs["attn_mask"] = attn_mask
    if is_causal:
        kwargs["is_causal"] = True
    result = ctx.call(x_q, x_kv, *ws, num_heads, during=what, wrt=wrt, grad_output=grad_output, **kwargs)
    out = ctx.tensor_out(result, tuple(x_q.shape), what)
    ref64 = multi_head_attention(_up(x_q), _up(x_kv), *map(_up, ws), num_heads, _up(attn_mask), is_causal)
    same = multi_head_attention(x_q, x_kv, *ws, num_heads, attn_mask, is_causal)
    cmp = compare(out, ref64, allowance(ref64, same, x_q.dtype))
    if cmp.ok:
        ctx.attention_seen = True
        return out, ref64, cmp, result
    details = {"case": what, "shapes": f"x_q {shape_str(x_q)}, x_kv {shape_str(x_kv)}, "
                                       f"d_model {x_q.size(-1)}, num_heads {num_heads}",
               "dtype": str(x_q.dtype).replace("torch.", ""), "mask": _mask_kind(attn_mask, is_causal),
               **cmp.details()}
    cause = diagnose(ctx, out, ref64, mha_variants(x_q, x_kv, ws, num_heads, attn_mask, is_causal), cmp,
                     lambda: ctx.call(x_q, x_kv, *ws, num_heads, during=what, **kwargs),
                     lambda: multi_head_attention(x_q.half(), x_kv.half(), *(w.half() for w in ws),
                                                  num_heads, _half(attn_mask), is_causal),
                     details)
    fail = Fail(cmp.failure(what, cause), details)
    fail.output = out
    raise fail
