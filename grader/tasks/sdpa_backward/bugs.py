"""Known wrong backward passes of attention, computed in the trusted parent to name a student's bug.

Two kinds, both float64 and each ``(dQ, dK, dV)``:

* **Slips in the backward itself**, written out step by step (P = softmax(S), dV = Pᵀ·dO,
  dP = dO·Vᵀ, dS = P ⊙ (dP − rowsum(dP ⊙ P)), dQ = s·dS·K, dK = s·dSᵀ·Q) with one step broken:
  the softmax Jacobian taken elementwise (without −ppᵀ, or as its diagonal p(1 − p)), the row sum
  over the wrong axis or over the batch, the
  scale missing or applied twice, a transpose missing, dK or dV overwritten instead of summed over
  query blocks, an epsilon in the softmax, masked keys given gradient.
* **A wrong forward, differentiated exactly**: the gradients of every known wrong attention
  (``variants.sdpa_variants``: mask polarity, causal off by one, softmax over the queries, …),
  taken by the parent's own autograd. A student who writes the right backward for the wrong
  forward has that forward's bug, and it is named (and charged) as in ``sdpa``.

A bug with a parameter the student chose (a block size, an epsilon) has one candidate per value,
keyed ``name:value`` (``tuples.key_name`` gives the name back).
"""
from __future__ import annotations

import math

import torch

from ...checks import variants
from ...checks.variants import sdpa_variants
from ...i18n import N_

NAMES = ("dQ", "dK", "dV")
BUGS = {
    "no_jacobian_outer": N_("your softmax backward drops the −ppᵀ part of the Jacobian (dS = P ⊙ dP): the "
                            "Jacobian of a softmax row is diag(p) − ppᵀ, so subtract the row sum: "
                            "dS = P ⊙ (dP − rowsum(dP ⊙ P))"),
    "jacobian_diagonal": N_("your softmax backward uses only the diagonal of the Jacobian, dS = P ⊙ (1 − P) ⊙ dP: "
                            "the off-diagonal terms −p_i·p_j matter as much; dS = P ⊙ (dP − rowsum(dP ⊙ P))"),
    "rowsum_wrong_axis": N_("the row sum in dS runs over the queries (dim=-2): each softmax row needs the sum over "
                            "its own keys, dS = P ⊙ (dP − (dP ⊙ P).sum(-1, keepdim=True))"),
    "rowsum_over_batch": N_("the row sum in dS also adds up the other batch elements (and heads): take "
                            "(dP ⊙ P).sum(-1, keepdim=True), one sum per query row of each batch element"),
    "no_scale_in_grads": N_("dQ and dK miss the scale: the scores are s·QKᵀ, so dQ = s·dS·K and dK = s·dSᵀ·Q "
                            "(s = 1/√d_k unless scale= is given)"),
    "grad_scale_twice": N_("dQ and dK carry the scale twice (s² instead of s): the scores are s·QKᵀ, so dQ = s·dS·K "
                           "and dK = s·dSᵀ·Q; scale either dS or the products, not both"),
    "scale_ignored": N_("you ignore the scale= argument and always use 1/√d_k"),
    "mask_not_in_ds": N_("the mask is not applied in the backward: the probabilities you use for dS come from "
                         "the unmasked scores, so masked keys get gradient; use the masked P for dS too"),
    "dv_not_transposed": N_("dV = Pᵀ·dO: you multiplied P·dO (the transpose is missing)"),
    "dk_not_transposed": N_("dK = s·dSᵀ·Q: you multiplied dS·Q (the transpose is missing)"),
    "dq_transposed": N_("dQ = s·dS·K: you multiplied dSᵀ·K (dS must not be transposed for dQ)"),
    "dq_dk_swapped": N_("you return dK in the place of dQ and dQ in the place of dK: the order is (dQ, dK, dV)"),
    "dk_overwritten": N_("your dK keeps only the last query rows' share: each query row (or block of rows) adds "
                         "to every key's gradient, so accumulate dK += … over them instead of assigning it"),
    "dv_overwritten": N_("your dV keeps only the last query rows' share: each query row (or block of rows) adds "
                         "to every value's gradient, so accumulate dV += … over them instead of assigning it"),
    "softmax_epsilon": N_("your softmax adds an epsilon to its denominator, so the probabilities no longer sum "
                          "to 1 and every gradient is off: subtract the row maximum instead, which already keeps "
                          "exp() finite and the sum at least 1"),
    "grads_wrong_dtype": N_("your gradients are not in the inputs' dtype: return dQ, dK and dV as query.dtype "
                            "(float64 inputs need float64 gradients, float32 inputs float32 ones)"),
    "causal_ignored": N_("is_causal=True has no effect in your backward"),
    "float_mask_ignored": N_("you ignore the float mask: it is added to the scaled scores (forward and backward)"),
}
# The family each is charged to (grader/causes.py), after attention's for a name it already has. The
# task's catalogue (Task.bugs): its own sentences win ("... in your backward").
CATALOGUE = variants.ATTENTION.extend(BUGS, {
    "no_jacobian_outer": ("jacobian",), "jacobian_diagonal": ("jacobian",), "rowsum_wrong_axis": ("jacobian",),
    "rowsum_over_batch": ("jacobian",),
    "no_scale_in_grads": ("scale",), "grad_scale_twice": ("scale",), "mask_not_in_ds": ("mask",),
    "dv_not_transposed": ("output",), "dk_not_transposed": ("output",), "dq_transposed": ("output",),
    "dq_dk_swapped": ("output",), "dk_overwritten": ("output",), "dv_overwritten": ("output",),
    "softmax_epsilon": ("output",), "grads_wrong_dtype": ("dtype", "output"),
}, by_check=("grads_wrong_dtype",))  # the dtype checks see it; no gradient is computed for it
# Bugs that make a gradient the wrong shape when L != S (the function usually raises there).
SHAPE_BUGS = {"dq_transposed", "dk_not_transposed", "dv_not_transposed", "dq_dk_swapped"}
BLOCKS = (1, 2, 4, 8, 16, 32, 64)                       # query-block sizes of an overwriting loop
EPSILONS = (1e-2, 1e-3, 1e-4, 1e-5)                     # big enough to show (smaller ones are harmless)


def hand_written(q, k, v, g, attn_mask=None, is_causal=False, scale=None, only=None) -> tuple:
    """(the correct backward, {bug or "bug:value": the backward with that slip}) in float64, written
    out step by step; the slips share the steps they do not change. A slip that changes a shape
    (L != S) is left out: the shape check names it. ``only`` (bug names) computes just those."""
    q, k, v, g = q.double(), k.double(), v.double(), g.double()
    L, S = q.size(-2), k.size(-2)
    s = 1 / math.sqrt(q.size(-1)) if scale is None else scale
    base = q @ k.transpose(-2, -1) * s
    scores = base if attn_mask is None or attn_mask.dtype == torch.bool else base + attn_mask.double()
    keep = torch.ones(L, S, dtype=torch.bool).tril() if is_causal else (
        attn_mask if attn_mask is not None and attn_mask.dtype == torch.bool else None)
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    p = torch.softmax(scores, dim=-1)
    dp = g @ v.transpose(-2, -1)

    def grads(ds, probs=p, gs=s):
        return gs * (ds @ k), gs * (ds.transpose(-2, -1) @ q), probs.transpose(-2, -1) @ g

    def jacobian(probs, rows_dims=(-1,)):
        return probs * (dp - (dp * probs).sum(dim=rows_dims, keepdim=True))

    def epsilon(eps, shifted):
        e = torch.exp(scores - (scores.amax(-1, keepdim=True) if shifted else 0.0))
        pe = e / (e.sum(-1, keepdim=True) + eps)
        return grads(jacobian(pe), pe)

    def overwritten(rows, which):
        if which == "dK":
            return dq, s * (ds[..., rows, :].transpose(-2, -1) @ q[..., rows, :]), dv
        return dq, dk, p[..., rows, :].transpose(-2, -1) @ g[..., rows, :]

    ds = jacobian(p)
    dq, dk, dv = correct = grads(ds)
    slips = {"no_jacobian_outer": lambda: grads(p * dp), "jacobian_diagonal": lambda: grads(p * (1 - p) * dp),
             "rowsum_wrong_axis": lambda: grads(jacobian(p, (-2,))),
             "no_scale_in_grads": lambda: (dq / s, dk / s, dv), "grad_scale_twice": lambda: (dq * s, dk * s, dv)}
    if q.dim() > 2:
        slips["rowsum_over_batch"] = lambda: grads(jacobian(p, tuple(range(q.dim() - 2)) + (-1,)))
    if L == S:
        slips.update({"dv_not_transposed": lambda: (dq, dk, p @ g),
                      "dk_not_transposed": lambda: (dq, s * (ds @ q), dv),
                      "dq_transposed": lambda: (s * (ds.transpose(-2, -1) @ k), dk, dv),
                      "dq_dk_swapped": lambda: (dk, dq, dv)})
    for block in BLOCKS:
        last = ((L - 1) // block) * block  # the first row of the last block of query rows
        if last and not any(((L - 1) // b) * b == last for b in BLOCKS if b < block):
            slips[f"dk_overwritten:{block}"] = lambda rows=slice(last, None): overwritten(rows, "dK")
            slips[f"dv_overwritten:{block}"] = lambda rows=slice(last, None): overwritten(rows, "dV")
    for eps in EPSILONS:
        for shifted in (True, False):
            slips[f"softmax_epsilon:{eps}{'' if shifted else ',unshifted'}"] = \
                lambda eps=eps, shifted=shifted: epsilon(eps, shifted)
    if keep is not None or scores is not base:  # dS from the probabilities of the scores without the mask
        slips["mask_not_in_ds"] = lambda: grads(torch.exp(base - torch.logsumexp(scores, dim=-1, keepdim=True))
                                                * (dp - (dp * p).sum(-1, keepdim=True)))
    return correct, {key: make() for key, make in slips.items() if only is None or key.split(":")[0] in only}


def candidates(q, k, v, g, attn_mask=None, is_causal=False, scale=None) -> dict:
    """Every known wrong backward on these inputs: {name or name:value: (dQ, dK, dV)}."""
    out = hand_written(q, k, v, g, attn_mask, is_causal, scale)[1]
    out.update({name: grads for name, grads in forward_bugs(q, k, v, g, attn_mask, is_causal, scale).items()
                if name not in out})
    return out


def forward_bugs(q, k, v, g, attn_mask=None, is_causal=False, scale=None, only=None) -> dict:
    """The exact gradients of every known wrong attention forward, by the parent's autograd (``only``:
    just those bugs)."""
    mask = attn_mask if attn_mask is None or attn_mask.dtype == torch.bool else attn_mask.double()
    leaves = [t.detach().double().requires_grad_(True) for t in (q, k, v)]
    out = {}
    for name, o in sdpa_variants(*leaves, mask, is_causal, scale).items():
        if isinstance(o, torch.Tensor) and o.shape == g.shape and o.requires_grad and (only is None or name in only):
            grads = torch.autograd.grad((o * g.double()).nan_to_num().sum(), leaves, allow_unused=True,
                                        retain_graph=True)
            out[name] = tuple(torch.zeros_like(t) if d is None else d for d, t in zip(grads, leaves))
    return out


def wrong_outputs(args, kwargs) -> tuple:
    """(the right (dQ, dK, dV), {bug: the gradients with that bug}) on one call's arguments, in float64,
    for ``attn-grader tasks validate``."""
    from .checks import reference_grads
    q, k, v, g = (t.double() for t in args[:4])
    mask, causal, scale = kwargs.get("attn_mask"), kwargs.get("is_causal", False), kwargs.get("scale")
    if mask is not None and mask.is_floating_point():
        mask = mask.double()
    return reference_grads(q, k, v, g, mask, causal, scale), candidates(q, k, v, g, mask, causal, scale)
