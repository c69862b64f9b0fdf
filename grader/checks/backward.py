"""Checks of the ``sdpa_backward`` task: (dQ, dK, dV) of attention written by hand, without autograd.

The parent computes the reference gradients with its own autograd through the float64
reference attention, and every known-bug variant with the hand-written formulas below
(P = softmax(S), dV = Pᵀ·dO, dP = dO·Vᵀ, dS = P ⊙ (dP − rowsum(dP ⊙ P)), dQ = s·dS·K,
dK = s·dSᵀ·Q) with one step broken. Autograd inside the student's function is forbidden:
the source is scanned for it, and the child's trace of backward kernels is a detection.
"""
from __future__ import annotations

import math

import torch

from reference_impl import scaled_dot_product_attention
from . import tuples, variants
from .base import Fail
from .calls import sdpa_kwargs
from .tolerance import GRAD_FLOOR_FACTOR, GRAD_MULTIPLIER
from .tuples import Outputs, flat, judge
from ..i18n import N_, T

NAMES = ("dQ", "dK", "dV")
BUGS = {
    "no_jacobian_outer": N_("your softmax backward keeps only the diagonal of the Jacobian (dS = P ⊙ dP): the "
                            "Jacobian of a softmax row is diag(p) − ppᵀ, so subtract the row sum: "
                            "dS = P ⊙ (dP − rowsum(dP ⊙ P))"),
    "no_scale_in_grads": N_("dQ and dK miss the scale: the scores are s·QKᵀ, so dQ = s·dS·K and dK = s·dSᵀ·Q "
                            "(s = 1/√d_k unless scale= is given)"),
    "scale_ignored": N_("you ignore the scale= argument and always use 1/√d_k"),
    "mask_not_in_ds": N_("the mask is not applied in the backward: the probabilities you use for dS come from "
                         "the unmasked scores, so masked keys get gradient; use the masked P for dS too"),
    "dv_not_transposed": N_("dV = Pᵀ·dO: you multiplied P·dO (the transpose is missing)"),
    "dk_not_transposed": N_("dK = s·dSᵀ·Q: you multiplied dS·Q (the transpose is missing)"),
    "dq_transposed": N_("dQ = s·dS·K: you multiplied dSᵀ·K (dS must not be transposed for dQ)"),
    "dq_dk_swapped": N_("you return dK in the place of dQ and dQ in the place of dK: the order is (dQ, dK, dV)"),
    "causal_ignored": N_("is_causal=True has no effect in your backward"),
    "float_mask_ignored": N_("you ignore the float mask: it is added to the scaled scores (forward and backward)"),
}
# The family each of these bugs is charged to (grader/causes.py), and their sentences for it.
variants.register(BUGS, {
    "no_jacobian_outer": ("jacobian",), "no_scale_in_grads": ("scale",), "mask_not_in_ds": ("mask",),
    "dv_not_transposed": ("output",), "dk_not_transposed": ("output",), "dq_transposed": ("output",),
    "dq_dk_swapped": ("output",),
})
# Which transposition a wrong shape gives away (output, wrong rows): "S"/"L" is the row count found.
SHAPE_HINTS = {("dQ", "S"): "dq_transposed", ("dK", "L"): "dk_not_transposed", ("dV", "L"): "dv_not_transposed"}
# Names whose use in the source means autograd computes the gradients.
AUTOGRAD_NAMES = {"backward", "autograd", "grad", "vjp", "jvp", "jacrev", "jacfwd", "jacobian",
                  "requires_grad_", "enable_grad", "set_grad_enabled", "_execution_engine", "run_backward",
                  "_ImperativeEngine", "_softmax_backward_data"}
AUTOGRAD_FRAGMENTS = ("grad", "backward", "engine", "vjp", "jac")
DYNAMIC = {"getattr", "setattr", "__import__", "import_module", "eval", "exec", "attrgetter"}
# aten operators that only run in a backward pass (the child's trace of them is a detection).
BACKWARD_FRAGMENTS = ("backward", "autograd.grad")


def explain(name: str | None) -> str:
    text = BUGS.get(name, "") if name else ""
    return T(text) if text else ""  # a T: rendered in the reader's language


def reference_grads(q, k, v, g, attn_mask=None, is_causal=False, scale=None):
    """(dQ, dK, dV) by the parent's own autograd through the reference attention."""
    leaves = [t.detach().clone().requires_grad_(True) for t in (q, k, v)]
    out = scaled_dot_product_attention(*leaves, attn_mask, is_causal=is_causal, scale=scale)
    return tuple(torch.autograd.grad((out * g).sum(), leaves))


def variant(q, k, v, g, attn_mask=None, is_causal=False, scale=None, bug=None):
    """The hand-written backward in float64, with ``bug`` switched on (None: correct)."""
    q, k, v, g = q.double(), k.double(), v.double(), g.double()
    L, S = q.size(-2), k.size(-2)
    if bug in ("dv_not_transposed", "dk_not_transposed", "dq_transposed") and L != S:
        return None  # the bug changes the shapes: the shape check names it
    s = 1 / math.sqrt(q.size(-1)) if scale is None or bug == "scale_ignored" else scale
    raw = q @ k.transpose(-2, -1) * s
    keep = None
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        keep = attn_mask
    elif attn_mask is not None and bug != "float_mask_ignored":
        raw = raw + attn_mask.double()
    if is_causal and bug != "causal_ignored":
        keep = torch.ones(L, S, dtype=torch.bool).tril()
    scores = raw if keep is None else raw.masked_fill(~keep, float("-inf"))
    p = torch.softmax(scores, dim=-1)
    dv = p @ g if bug == "dv_not_transposed" else p.transpose(-2, -1) @ g
    dp = g @ v.transpose(-2, -1)
    rows = (dp * p).sum(-1, keepdim=True)
    if bug == "no_jacobian_outer":
        ds = p * dp
    elif bug == "mask_not_in_ds":
        if keep is None:
            return None
        unmasked = torch.exp(raw - torch.logsumexp(scores, dim=-1, keepdim=True))
        ds = unmasked * (dp - rows)
    else:
        ds = p * (dp - rows)
    gs = 1.0 if bug == "no_scale_in_grads" else s
    dq = gs * (ds.transpose(-2, -1) @ k if bug == "dq_transposed" else ds @ k)
    dk = gs * (ds @ q if bug == "dk_not_transposed" else ds.transpose(-2, -1) @ q)
    if bug == "dq_dk_swapped":
        if dq.shape != dk.shape:
            return None
        dq, dk = dk, dq
    return dq, dk, dv


def _bugs(attn_mask, is_causal, scale) -> list:
    bugs = ["no_jacobian_outer", "no_scale_in_grads", "dv_not_transposed", "dk_not_transposed", "dq_transposed",
            "dq_dk_swapped"]
    if is_causal or (attn_mask is not None and attn_mask.dtype == torch.bool):
        bugs.append("mask_not_in_ds")
    if attn_mask is not None and attn_mask.dtype != torch.bool:
        bugs.append("float_mask_ignored")
    if is_causal:
        bugs.append("causal_ignored")
    if scale is not None:
        bugs.append("scale_ignored")
    return bugs


def _variants(q, k, v, g, attn_mask, is_causal, scale) -> dict:
    """Every bug that applies here, as one flat vector (dQ, dK, dV concatenated)."""
    out = {}
    for bug in _bugs(attn_mask, is_causal, scale):
        grads = variant(q, k, v, g, attn_mask, is_causal, scale, bug)
        if grads is not None:
            out[bug] = flat(grads)
    return out


SPEC = Outputs(names=NAMES, explain=explain, multiplier=GRAD_MULTIPLIER, floor_factor=GRAD_FLOOR_FACTOR)


def run_backward(ctx, q, k, v, g, attn_mask=None, is_causal=False, scale=None, *, what: str):
    """Call, compare each gradient with the parent's autograd reference, diagnose. Returns the worst error."""
    mask64 = None if attn_mask is None else (attn_mask if attn_mask.dtype == torch.bool else attn_mask.double())

    def shape_hint(name, shape):
        rows = {q.size(-2): "L", k.size(-2): "S"}.get(shape[-2])
        return SHAPE_HINTS.get((name, rows))

    _, worst = judge(ctx, SPEC, (q, k, v, g), sdpa_kwargs(attn_mask, is_causal, scale),
                     shapes=[q.shape, k.shape, v.shape],
                     ref64=reference_grads(q.double(), k.double(), v.double(), g.double(), mask64, is_causal, scale),
                     same=reference_grads(q, k, v, g, attn_mask, is_causal, scale),
                     variants=lambda: {bug: variant(q, k, v, g, attn_mask, is_causal, scale, bug)
                                       for bug in _bugs(attn_mask, is_causal, scale)},
                     what=what, shape_hint=shape_hint)
    return worst


# ---- inputs -----------------------------------------------------------------------------
def _case(ctx, L, S, E, Ev, dtype=torch.float64, batch=None):
    r = ctx.inputs.randn
    batch = batch or tuple(ctx.inputs.distinct(2, 2, 4))
    return r(*batch, L, E, dtype=dtype), r(*batch, S, E, dtype=dtype), r(*batch, S, Ev, dtype=dtype), \
        r(*batch, L, Ev, dtype=dtype)


def _dims(ctx):
    return ctx.inputs.distinct(4, 5, 12)   # L, S, E, Ev all distinct


# ---- checks -----------------------------------------------------------------------------
def shapes(ctx):
    L, S, E, Ev = _dims(ctx)
    worst = run_backward(ctx, *_case(ctx, L, S, E, Ev, torch.float32),
                         what=T("4-D float32 inputs (L={L}, S={S}, E={E}, Ev={Ev})", L=L, S=S, E=E, Ev=Ev))
    N = ctx.inputs.randint(2, 5)
    worst = max(worst, run_backward(ctx, *_case(ctx, L, S, E, Ev, torch.float32, batch=(N,)),
                                    what=T("3-D float32 inputs (N={N}, L={L}, S={S})", N=N, L=L, S=S)))
    return T("dQ, dK and dV match autograd's on 3-D and 4-D inputs with L != S, E != Ev (max "
             "error {worst:.2g})", worst=worst)


def square(ctx):
    """L == S: a missing or extra transpose keeps the shapes here, so only the values can tell."""
    L, E, Ev = ctx.inputs.distinct(3, 5, 12)
    worst = run_backward(ctx, *_case(ctx, L, L, E, Ev), what=T("self-attention shapes (L = S = {L})", L=L))
    return T("with L = S every gradient is transposed the right way (max error {worst:.2g})", worst=worst)


def float64(ctx):
    L, S, E, Ev = _dims(ctx)
    worst = run_backward(ctx, *_case(ctx, L, S, E, Ev), what=T("float64 inputs"))
    return T("float64 inputs give float64-accurate gradients (max error {worst:.2g})", worst=worst)


def _dtype_args(ctx, dtype):
    L, S, E, Ev = _dims(ctx)
    return _case(ctx, L, S, E, Ev, dtype)


def dtype_case(dtype):
    return tuples.dtype_case(dtype, _dtype_args, SPEC, lambda args: [t.shape for t in args[:3]])


def jacobian(ctx):
    """Large scores (peaked rows) make the −ppᵀ term of the softmax Jacobian dominate."""
    L, S, E, Ev = _dims(ctx)
    q, k, v, g = _case(ctx, L, S, E, Ev)
    run_backward(ctx, q * 2, k, v, g, what=T("peaked attention rows (query scaled by 2, "
                                             "L={L}, S={S})", L=L, S=S))
    return T("the softmax backward uses the full Jacobian diag(p) − ppᵀ")


def scale_default(ctx):
    L, S, Ev = ctx.inputs.distinct(3, 5, 10)
    E = ctx.inputs.randint(24, 40)   # a large d_k: a missing 1/√d_k is far off
    run_backward(ctx, *_case(ctx, L, S, E, Ev), what=T("default scale 1/√{E}", E=E))
    return T("dQ and dK carry the default scale 1/√d_k")


def scale_argument(ctx):
    L, S, E, Ev = _dims(ctx)
    value = round(ctx.inputs.uniform(0.15, 0.6), 3)
    run_backward(ctx, *_case(ctx, L, S, E, Ev), scale=value, what=T("scale={value}", value=value))
    return T("the scale= argument is used in the forward and in dQ, dK (scale={value})", value=value)


def mask_bool(ctx):
    L, S, E, Ev = _dims(ctx)
    mask = ctx.inputs.bool_mask(L, S)
    run_backward(ctx, *_case(ctx, L, S, E, Ev), attn_mask=mask, what=T("boolean mask ({L}, {S})", L=L, S=S))
    return T("a boolean mask hides its keys in the forward and in the backward")


def mask_float(ctx):
    L, S, E, Ev = _dims(ctx)
    mask = ctx.inputs.float_mask(L, S, dtype=torch.float64)
    run_backward(ctx, *_case(ctx, L, S, E, Ev), attn_mask=mask, what=T("float (additive) mask ({L}, {S})",
                                                                       L=L, S=S))
    return T("a float mask is added to the scaled scores and handled in the backward")


def causal_square(ctx):
    L, E, Ev = ctx.inputs.distinct(3, 5, 12)
    run_backward(ctx, *_case(ctx, L, L, E, Ev), is_causal=True, what=T("is_causal=True, L = S = {L}", L=L))
    return T("is_causal=True hides the future in the backward too")


def causal_rectangular(ctx):
    L, S = sorted(ctx.inputs.distinct(2, 5, 12))
    E, Ev = ctx.inputs.distinct(2, 5, 12)
    run_backward(ctx, *_case(ctx, L, S, E, Ev), is_causal=True, what=T("is_causal=True, L={L} < S={S}",
                                                                       L=L, S=S))
    return T("the causal mask is aligned top-left (ones(L, S).tril()) when L != S")


# ---- autograd is forbidden ------------------------------------------------------------
def autograd_static(ctx):
    """Autograd reached from the source: torch.autograd, .backward(), torch.func, requires_grad_."""
    import ast

    from ..source import dotted, parse_python
    tree = parse_python(ctx.session.source)
    found = []
    for node in ast.walk(tree):
        name = node.attr if isinstance(node, ast.Attribute) else (
            node.id if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) else None)
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch":
            hits = [a.name for a in node.names if a.name in AUTOGRAD_NAMES or "autograd" in (node.module or "")
                    or (node.module or "").startswith("torch.func")]
            if hits:
                found.append({"line": node.lineno, "what": f"imports {', '.join(hits)} from {node.module}"})
        elif isinstance(node, ast.Attribute) and name in AUTOGRAD_NAMES:
            found.append({"line": node.lineno, "what": f"uses {dotted(node)}"})
        elif isinstance(node, ast.keyword) and node.arg == "requires_grad":
            found.append({"line": getattr(node.value, "lineno", 0), "what": "creates tensors with requires_grad"})
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in DYNAMIC:
            # getattr(torch, "auto" + "grad"), setattr(t, "requires_" + "grad", True): the literal parts joined
            parts = sorted((n.lineno, n.col_offset, n.value) for a in node.args for n in ast.walk(a)
                           if isinstance(n, ast.Constant) and isinstance(n.value, str))  # in source order
            text = "".join(p[2] for p in parts).lower()
            hit = next((f for f in AUTOGRAD_FRAGMENTS if f in text), None)
            if hit:
                found.append({"line": node.lineno, "what": f"looks up a name containing {hit!r} dynamically "
                                                           f"({node.func.id})"})
    if found:
        lines = "; ".join(f"line {f['line']}: {f['what']}" for f in found[:5])
        raise Fail(T("autograd is not allowed in this task: compute dQ, dK and dV with your "
                     "own formulas ({lines})", lines=lines), {"findings": found[:20], "detected": True})
    return T("no autograd in the source")


def autograd_runtime(ctx):
    """Post phase: no blocked autograd attempt and no backward kernel in the child's trace (advisory
    evidence, but it can only incriminate; autograd itself is switched off in the child)."""
    hits = sorted({op for op in ctx.ops if any(f in op.lower() for f in BACKWARD_FRAGMENTS)}
                  | {b.split(":", 1)[1] for b in ctx.blocked if b.startswith("autograd:")})
    if hits:
        raise Fail(T("your function ran autograd's backward ({value}): compute the gradients "
                     "with your own formulas", value=', '.join(hits[:4])), {"ops": hits[:20], "detected": True})
    return T("no backward kernel ran ({count} distinct operations traced over {calls} calls)",
             count=len(ctx.ops), calls=ctx.calls)

