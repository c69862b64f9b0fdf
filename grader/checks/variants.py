"""Known wrong attentions, computed in the trusted parent to name a student's bug.

When a submission's output misses the reference, it is compared with each of these
buggy variants on the same inputs; a match (to rounding) names the mistake in the
words a student would use. Everything here is float64.
"""
from __future__ import annotations

import math

import torch

from . import diagnosis_texts
from .bugs import Catalogue
from .base import broadcast_shapes
from .tolerance import relative_error
from ..i18n import N_, T

BUGS = {
    "no_scale": N_("you do not scale the scores: divide Q·Kᵀ by √d_k before the softmax"),
    "scale_dk": N_("you divide the scores by d_k instead of √d_k"),
    "scale_sqrt_mult": N_("you multiply the scores by √d_k instead of dividing"),
    "scale_ignored": N_("you ignore the scale= argument and always use 1/√d_k"),
    "scale_twice": N_("you apply both the scale= argument and 1/√d_k; when scale is given use only it"),
    "scale_after_softmax": N_("you scale after the softmax: the 1/√d_k belongs inside, on the scores"),
    "softmax_queries": N_("your softmax normalises over the queries (dim=-2) instead of the keys (dim=-1)"),
    "mask_polarity": N_("your boolean mask has the wrong polarity: True means the key MAY be attended to "
                        "(the opposite of nn.MultiheadAttention's key_padding_mask)"),
    "masked_fill_zero": N_("you fill masked scores with 0 instead of -inf, so masked keys still get weight"),
    "mask_multiply": N_("you multiply the scores by the mask, which sets masked scores to 0 rather than -inf"),
    "mask_after_softmax": N_("you apply the mask after the softmax without renormalising, so the weights no "
                             "longer sum to 1"),
    "mask_ignored": N_("your function ignores attn_mask: hide the keys where the boolean mask is False"),
    "bool_mask_added": N_("you add the boolean mask to the scores as numbers instead of hiding the False keys"),
    "float_mask_ignored": N_("you ignore the float mask (or treat it as boolean): a float mask is ADDED to "
                             "the scaled scores"),
    "float_mask_as_bool": N_("you treat the float mask as boolean (only its -inf entries count): its finite "
                             "values must be added to the scores too"),
    "float_mask_scaled": N_("you add the float mask before scaling: it must be added AFTER multiplying by "
                            "the scale"),
    "float_mask_subtracted": N_("you subtract the float mask: it must be added to the scores"),
    "causal_diagonal": N_("your causal mask is off by one: it hides the diagonal, but query i may see key i"),
    "causal_bottom_right": N_("your causal mask is aligned to the bottom-right; the contract is top-left "
                              "(ones(L, S).tril()), which differs when L != S"),
    "causal_ignored": N_("is_causal=True has no effect in your function"),
    "causal_reversed": N_("your causal mask hides the past instead of the future (triu instead of tril)"),
    "split_no_transpose": N_("you split the heads with a view/reshape to (B, H, L, d_k) without a transpose: "
                             "reshape to (B, L, H, d_k) and then transpose(1, 2)"),
    "heads_interleaved": N_("you split the features into heads as (d_k, H) instead of (H, d_k), so head h gets "
                            "every H-th feature: reshape to (B, T, H, d_k), then transpose(1, 2); head h owns "
                            "the weights' rows h·d_k to (h+1)·d_k − 1"),
    "scale_precedence": N_("you scale by 1/(2·d_k): d_k ** -1/2 is read as (d_k ** -1) / 2; write "
                           "d_k ** -0.5 or 1 / math.sqrt(d_k)"),
    "merge_no_transpose": N_("you merge the heads with a view/reshape without transposing back: "
                             "transpose(1, 2) to (B, L, H, d_k) before reshaping to (B, L, d_model)"),
    "split_merge_no_transpose": N_("you split and merge the heads with views that skip the transposes"),
    "batch_mixed": N_("every query attends to the keys of every batch element: you flattened the batch "
                      "dimensions into the sequence; keep them as leading dimensions"),
    "scale_dmodel": N_("you scale by 1/√d_model instead of the per-head 1/√d_k"),
    "scale_dv": N_("you scale by 1/√ of the values' last dimension (value.size(-1)) instead of the "
                   "queries' and keys' d_k = query.size(-1); the two differ when value is wider or narrower"),
    "scale_constant": N_("you hard-code the scale 1/8 (that is 1/√64), which is right only at d_k = 64: use "
                         "1/√(query.size(-1))"),
    "no_out_proj": N_("you leave out the output projection w_o"),
    "weights_not_transposed": N_("you apply the weights as x @ W instead of x @ Wᵀ (like nn.Linear)"),
    "mask_heads_repeat": N_("you expand the per-batch mask to batch × heads with repeat, which pairs masks with "
                            "the wrong batch elements: use repeat_interleave(num_heads, dim=0), or keep the "
                            "(B, 1, L, S) mask and let it broadcast over the heads"),
    "inputs_modified": N_("your function modifies its inputs in place (q /= s, masked_fill_): the caller's "
                          "tensors change, and autograd refuses in-place changes to tensors it differentiates"),
    "mask_first_head": N_("you apply one head's mask to every head: a (B, H, L, S) mask gives each head its own"),
    "nondeterministic": N_("your function returns different results for the same inputs: is dropout "
                           "(or some other randomness) still switched on?"),
    "low_precision": N_("your error is the size of float16/bfloat16 rounding: part of your computation "
                        "runs in half precision; compute in the input's dtype"),
    "float32_precision": N_("your float64 result has only float32 precision: part of your computation runs "
                            "in float32 (e.g. .float() or a float32 constant tensor); compute in the input's "
                            "dtype"),
    "residual_layernorm": N_("you add the residual and apply LayerNorm inside the attention: the layer "
                             "returns the attention output only (the residual and LayerNorm belong to the "
                             "encoder block around it)"),
}


def attend(q, k, v, scale, *, keep=None, additive=None, softmax_dim=-1, fill=float("-inf"),
           multiply_mask=False, after_softmax_mask=None, post_scale=1.0, additive_before_scale=False):
    """A configurable, deliberately buggy-or-not attention (float64 in, float64 out)."""
    scores = q @ k.transpose(-2, -1)
    if additive is not None and additive_before_scale:
        scores = scores + additive
    scores = scores * scale
    if additive is not None and not additive_before_scale:
        scores = scores + additive
    if keep is not None:
        scores = scores * keep if multiply_mask else scores.masked_fill(~keep, fill)
    weights = torch.softmax(scores, dim=softmax_dim) * post_scale
    if after_softmax_mask is not None:
        weights = weights * after_softmax_mask
    return weights @ v


def sdpa_variants(q, k, v, attn_mask=None, is_causal=False, scale=None) -> dict:
    q, k, v = q.double(), k.double(), v.double()
    d, L, S = q.size(-1), q.size(-2), k.size(-2)
    s = 1 / math.sqrt(d) if scale is None else scale
    keep, additive = None, None
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        keep = attn_mask
    elif attn_mask is not None:
        additive = attn_mask.double()
    if is_causal:
        keep = torch.ones(L, S, dtype=torch.bool).tril()
    out = {"no_scale": attend(q, k, v, 1.0, keep=keep, additive=additive),
           "scale_dk": attend(q, k, v, 1 / d, keep=keep, additive=additive),
           "scale_sqrt_mult": attend(q, k, v, math.sqrt(d), keep=keep, additive=additive),
           "scale_precedence": attend(q, k, v, 1 / (2 * d), keep=keep, additive=additive),
           "softmax_queries": attend(q, k, v, s, keep=keep, additive=additive, softmax_dim=-2),
           "scale_after_softmax": attend(q, k, v, 1.0, keep=keep, additive=additive, post_scale=s)}
    if attn_mask is None and not is_causal and q.dim() > 2:
        batch = broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        flat = lambda t: t.expand(*batch, *t.shape[-2:]).reshape(-1, t.size(-1))
        mixed = attend(flat(q), flat(k), flat(v), s)  # (N·L, Ev): one softmax over all batches' keys
        out["batch_mixed"] = mixed.reshape(*batch, L, v.size(-1))
    if scale is None and d != 64:
        out["scale_constant"] = attend(q, k, v, 1 / 8, keep=keep, additive=additive)
    if scale is None and v.size(-1) != d:
        out["scale_dv"] = attend(q, k, v, 1 / math.sqrt(v.size(-1)), keep=keep, additive=additive)
    if scale is not None:
        out["scale_ignored"] = attend(q, k, v, 1 / math.sqrt(d), keep=keep, additive=additive)
        out["scale_twice"] = attend(q, k, v, scale / math.sqrt(d), keep=keep, additive=additive)
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        m = attn_mask
        out["mask_polarity"] = attend(q, k, v, s, keep=~m)
        out["masked_fill_zero"] = attend(q, k, v, s, keep=m, fill=0.0)
        out["mask_multiply"] = attend(q, k, v, s, keep=m, multiply_mask=True)
        out["mask_after_softmax"] = attend(q, k, v, s, after_softmax_mask=m.double())
        out["bool_mask_added"] = attend(q, k, v, s, additive=m.double())
        out["mask_ignored"] = attend(q, k, v, s)
    elif attn_mask is not None:
        f = attn_mask.double()
        out["float_mask_ignored"] = attend(q, k, v, s)
        out["float_mask_as_bool"] = attend(q, k, v, s, keep=f != float("-inf"))
        out["float_mask_scaled"] = attend(q, k, v, s, additive=f, additive_before_scale=True)
        out["float_mask_subtracted"] = attend(q, k, v, s, additive=torch.where(f.isinf(), f, -f))
    if is_causal:
        out["causal_diagonal"] = attend(q, k, v, s, keep=torch.ones(L, S, dtype=torch.bool).tril(-1))
        out["causal_bottom_right"] = attend(q, k, v, s, keep=torch.ones(L, S, dtype=torch.bool).tril(S - L))
        out["causal_ignored"] = attend(q, k, v, s)
        out["causal_reversed"] = attend(q, k, v, s, keep=torch.ones(L, S, dtype=torch.bool).triu())
        if attn_mask is None:  # the future hidden by multiplying the weights, after the softmax
            out["mask_after_softmax"] = attend(q, k, v, s, after_softmax_mask=torch.ones(L, S).tril().double())
    return out


def mha_variant(x_q, x_kv, ws, num_heads, *, scale_rule="dk", split_ok=True, merge_ok=True,
                out_proj=True, transpose_w=True, residual_norm=False, interleaved=False, **attend_kw):
    """Multi-head attention with one of the usual mistakes switched on."""
    w_q, w_k, w_v, w_o = (w.double() for w in ws)
    x_q, x_kv = x_q.double(), x_kv.double()
    B, L, D = x_q.shape
    S, H = x_kv.size(1), num_heads
    dk = D // H
    lin = (lambda x, w: x @ w.T) if transpose_w else (lambda x, w: x @ w)

    def split(x, T):
        if interleaved:  # (B, T, d_k, H): head h holds features h, h + H, ...
            return x.reshape(B, T, dk, H).permute(0, 3, 1, 2)
        return x.reshape(B, T, H, dk).transpose(1, 2) if split_ok else x.reshape(B, H, T, dk)

    q, k, v = split(lin(x_q, w_q), L), split(lin(x_kv, w_k), S), split(lin(x_kv, w_v), S)
    scale = {"dk": 1 / math.sqrt(dk), "dmodel": 1 / math.sqrt(D), "none": 1.0, "dk_lin": 1 / dk,
             "dk_half": 1 / (2 * dk)}[scale_rule]
    heads = attend(q, k, v, scale, **attend_kw)
    if interleaved:
        merged = heads.permute(0, 2, 3, 1).reshape(B, L, D)
    else:
        merged = heads.transpose(1, 2).reshape(B, L, D) if merge_ok else heads.reshape(B, L, D)
    out = lin(merged, w_o) if out_proj else merged
    return torch.nn.functional.layer_norm(x_q + out, (D,)) if residual_norm else out


def mha_variants(x_q, x_kv, ws, num_heads, attn_mask=None, is_causal=False) -> dict:
    L, S = x_q.size(1), x_kv.size(1)
    kw = {}
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        kw["keep"] = attn_mask
    elif attn_mask is not None:
        kw["additive"] = attn_mask.double()
    if is_causal:
        kw["keep"] = torch.ones(L, S, dtype=torch.bool).tril()
    args = (x_q, x_kv, ws, num_heads)
    # 1/√d_model comes before 1/d_k: the two coincide when num_heads == d_k, and in a
    # multi-head task the d_model mix-up is the likelier bug (the first exact match wins).
    out = {"no_scale": mha_variant(*args, scale_rule="none", **kw),
           "scale_dmodel": mha_variant(*args, scale_rule="dmodel", **kw),
           "scale_dk": mha_variant(*args, scale_rule="dk_lin", **kw),
           "split_no_transpose": mha_variant(*args, split_ok=False, **kw),
           "merge_no_transpose": mha_variant(*args, merge_ok=False, **kw),
           "split_merge_no_transpose": mha_variant(*args, split_ok=False, merge_ok=False, **kw),
           "scale_precedence": mha_variant(*args, scale_rule="dk_half", **kw),
           "no_out_proj": mha_variant(*args, out_proj=False, **kw),
           "weights_not_transposed": mha_variant(*args, transpose_w=False, **kw),
           "softmax_queries": mha_variant(*args, softmax_dim=-2, **kw),
           "scale_after_softmax": mha_variant(*args, scale_rule="none", post_scale=1 / math.sqrt(
               x_q.size(-1) // num_heads), **kw),
           "residual_layernorm": mha_variant(*args, residual_norm=True, **kw)}
    if num_heads > 1:  # with one head an interleaved split is the identity
        out["heads_interleaved"] = mha_variant(*args, interleaved=True, **kw)
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        out["mask_polarity"] = mha_variant(*args, keep=~attn_mask)
        out["masked_fill_zero"] = mha_variant(*args, keep=attn_mask, fill=0.0)
        out["mask_ignored"] = mha_variant(*args)
        out["mask_after_softmax"] = mha_variant(*args, after_softmax_mask=attn_mask.double())
        B, H = x_q.size(0), num_heads
        if attn_mask.dim() == 4 and attn_mask.size(0) == B > 1:
            # (B·H) masks built with repeat: flat index b·H + h gets the mask of element (b·H + h) mod B
            per_batch = attn_mask.expand(B, H, L, S).reshape(B * H, L, S)[::H]  # (B, L, S)
            wrong = per_batch.repeat(H, 1, 1).reshape(B, H, L, S)
            out["mask_heads_repeat"] = mha_variant(*args, keep=wrong)
        if attn_mask.dim() == 4 and attn_mask.size(1) == num_heads > 1:
            out["mask_first_head"] = mha_variant(*args, keep=attn_mask[:, :1])
    elif attn_mask is not None:
        out["float_mask_ignored"] = mha_variant(*args)
        out["float_mask_scaled"] = mha_variant(*args, additive=attn_mask.double(), additive_before_scale=True)
    if is_causal:
        tri = torch.ones(L, S, dtype=torch.bool)
        out["causal_diagonal"] = mha_variant(*args, keep=tri.tril(-1))
        out["causal_bottom_right"] = mha_variant(*args, keep=tri.tril(S - L))
        out["causal_ignored"] = mha_variant(*args)
        out["causal_reversed"] = mha_variant(*args, keep=tri.triu())
        out["mask_after_softmax"] = mha_variant(*args, after_softmax_mask=tri.tril().double())
    return out


def identify(out: torch.Tensor, variants: dict, ref_error: float, allow_all_nan: bool = False,
             prefer=()) -> str | None:
    """The variant the output matches (NaN in a variant is a wildcard: a fully masked row).

    ``prefer``: the bugs already named in this grading. Where a case's inputs make two variants give
    the same values (one-hot rows, lengths that coincide), the one already seen elsewhere is taken,
    so that the case's draw does not decide which bug a file is charged with.

    With ``allow_all_nan`` (only once other calls showed the function computes attention: an
    all-NaN answer proves nothing by itself), a variant that is NaN everywhere matches an output
    that is NaN everywhere too, when it is the one such variant (a softmax over the queries with a
    fully masked key column, say)."""
    errors, all_nan = {}, []
    for name, candidate in variants.items():
        if not isinstance(candidate, torch.Tensor) or candidate.shape != out.shape:
            continue
        wild = candidate.isnan()
        if wild.all():
            all_nan.append(name)
            continue
        errors[name] = relative_error(torch.where(wild, torch.zeros_like(candidate), out.double()),
                                      torch.where(wild, torch.zeros_like(candidate), candidate))
    matched = {name: err for name, err in errors.items() if err < 2e-3 and err < ref_error / 10}
    seen = {name: err for name, err in matched.items() if name.partition(":")[0] in prefer}
    if seen or matched:
        pool = seen or matched
        return min(pool, key=pool.get)
    if allow_all_nan and len(all_nan) == 1 and bool(out.isnan().all()):
        return all_nan[0]
    return None


def explain(name: str | None) -> str:
    """Attention's sentence for the bug (a ``T``: rendered in the reader's language), "" for no known
    bug. A task's own wording is its catalogue's (``Task.bugs.explain``)."""
    text = BUGS.get(name, "") if name else ""
    return T(text) if text else ""


# The family each named bug is charged to (the first of these the task has): the check family
# that tests that very thing. Elsewhere the same bug is a knock-on and costs nothing more.
HOME = {
    "no_scale": ("scale", "output"), "scale_dk": ("scale",), "scale_sqrt_mult": ("scale",),
    "scale_ignored": ("scale",), "scale_twice": ("scale",), "scale_dmodel": ("scale",),
    "scale_constant": ("scale",), "scale_dv": ("scale",),
    "scale_after_softmax": ("weights", "scale"), "softmax_queries": ("weights", "output"),
    "mask_polarity": ("mask",), "masked_fill_zero": ("mask",), "mask_multiply": ("mask",),
    "mask_after_softmax": ("mask",), "mask_ignored": ("mask",), "bool_mask_added": ("mask",),
    "float_mask_ignored": ("mask",), "float_mask_as_bool": ("mask",), "float_mask_scaled": ("mask",),
    "float_mask_subtracted": ("mask",), "float_mask_not_added": ("mask",),
    "causal_diagonal": ("causal",), "causal_bottom_right": ("causal",), "causal_ignored": ("causal",),
    "causal_reversed": ("causal",),
    "split_no_transpose": ("heads",), "merge_no_transpose": ("heads",), "split_merge_no_transpose": ("heads",),
    "heads_interleaved": ("heads",), "scale_precedence": ("scale",),
    "batch_mixed": ("batch",), "no_out_proj": ("output",), "weights_not_transposed": ("output",),
    "mask_heads_repeat": ("mask",), "mask_first_head": ("mask",), "residual_layernorm": ("output",),
    "inputs_modified": ("inputs",),
    "nondeterministic": ("output",), "low_precision": ("dtype", "output"),
    "float32_precision": ("dtype", "output"),
}
# Bugs that scramble what the scale read-out sees (it cannot read a temperature through them):
# a read-out that fails after one of these was named is that bug's knock-on.
STRUCTURAL = {"split_no_transpose", "merge_no_transpose", "split_merge_no_transpose", "heads_interleaved",
              "no_out_proj",
              "weights_not_transposed", "residual_layernorm", "softmax_queries", "batch_mixed",
              "nondeterministic", "low_precision"}


# Attention's catalogue: the base every task's own extends (``Task.bugs``, grader/checks/bugs.py),
# with the causes diagnosis.py names by what differs and where.
BUGS.update(diagnosis_texts.TEXTS)
HOME.update(diagnosis_texts.HOMES)
ATTENTION = Catalogue(BUGS, HOME)
