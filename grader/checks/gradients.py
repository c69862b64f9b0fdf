"""``grad``: gradients against the reference's, and a gradcheck whose verdict the parent computes.

The child only ever runs the student's forward and backward; the numerical Jacobian
comes from the child's forward outputs under perturbations chosen here, stacked along
a leading batch dimension in one call when batch independence has passed.
"""
from __future__ import annotations

import torch

from reference_impl import multi_head_attention, scaled_dot_product_attention
from .base import Fail, shape_str
from .tolerance import GRAD_FLOOR_FACTOR, GRAD_MULTIPLIER, allowance, compare
from .variants import mha_variants, sdpa_variants
from ..i18n import T

SDPA_NAMES = ("query", "key", "value")
NOISE_HINT = T(" (a hand-written backward is the usual cause; a forward that computes in float32 internally also "
               "breaks float64 finite differences: compute in the input's dtype)")
MHA_NAMES = ("x_q", "x_kv", "w_q", "w_k", "w_v", "w_o")


def _ref_grads(fn, inputs, grad_output):
    leaves = [t.detach().clone().requires_grad_(True) for t in inputs]
    out = fn(*leaves)
    # The scalar <out, g> gives the same vector-Jacobian product without grad_outputs, whose
    # handling imports sympy on first use (0.4 s in a fresh process).
    return list(torch.autograd.grad((out * grad_output).sum(), leaves))


def compare_grads(result, names, ref64, same, dtype, what):
    if result.grads is None:
        err = result.grad_error
        if isinstance(err, dict):
            raise Fail(T("{what}: backward through your function raised {value}: {value2}",
                         what=what, value=err.get('type'), value2=err.get('message')),
                       {"traceback": err.get("traceback", ""), "no_gradient": True})
        raise Fail(T("{what}: no gradients flow: your output is not connected to the inputs' "
                     "autograd graph (.detach(), .data, .numpy(), .item() or "
                     "torch.tensor(...) on an intermediate breaks it)", what=what), {"no_gradient": True})
    worst = 0.0
    for name, g, r64, rs in zip(names, result.grads, ref64, same):
        if g is None:
            raise Fail(T("{what}: {name} gets no gradient: the path from {name} to the "
                         "output is cut (.detach(), .data, numpy, or an in-place copy)", what=what, name=name),
                       {"no_gradient": True})
        cmp = compare(g, r64, allowance(r64, rs, dtype, GRAD_MULTIPLIER, GRAD_FLOOR_FACTOR))
        if not cmp.ok:
            raise Fail(T("{what}: the gradient with respect to {name} is wrong: {value}",
                         what=what, name=name, value=cmp.describe()),
                       {"input": name, **cmp.details()})
        worst = max(worst, cmp.max_error)
    return worst


def _same_grad(got, expected, dtype) -> bool:
    """Equal within the gradient tolerance; an input that does not reach the output has no gradient
    (None) or a zero one, whichever autograd gives."""
    if expected is None or got is None:
        other = got if expected is None else expected
        return other is None or float(other.double().abs().max()) == 0.0
    return compare(got, expected, allowance(expected, expected, dtype, GRAD_MULTIPLIER, GRAD_FLOOR_FACTOR)).ok


def explained_by_known_bug(ctx, fail: Fail, result, names, variants_of, inputs, g, dtype, what) -> Fail:
    """A gradient miss that is exactly the gradient of a bug already named is that bug's knock-on
    (never a call that gave no gradient at all: grader/causes.py)."""
    if fail.details.get("no_gradient") or result.grads is None:
        return fail
    for name in ctx.diagnoses:
        leaves = [t.detach().double().requires_grad_(True) for t in inputs]
        try:
            out = variants_of(*leaves).get(name)
            if out is None:
                continue
            expected = torch.autograd.grad((out * g.double()).sum(), leaves, allow_unused=True)
        except (RuntimeError, ValueError):
            continue
        if all(_same_grad(gr, e, dtype) for gr, e in zip(result.grads, expected)):
            fail.details["diagnosis"] = name
            break
    return fail


def directional_check(ctx, inputs, extra, grads, g, names, kwargs, shape, what):
    """The child's gradients against its own forward: ⟨g, (f(x + εu) − f(x − εu)) / 2ε⟩ = Σ ⟨grad, u⟩.

    Computed here from two more forward calls, so gradients the child made up (or took from
    somewhere other than its forward) fail even if they look like the reference's. A forward that
    computes in float32 inside (a common library idiom, accepted) carries float32 rounding in both
    sides, which grows with the terms' size, not with their sum (they may cancel to a small number):
    the allowance has a part relative to Σ|⟨grad, u⟩| elementwise, so the verdict does not move with
    the draw, while a gradient that is not the forward's misses by the order of that sum itself.
    """
    eps = 1e-3
    us = [ctx.inputs.randn(*t.shape, dtype=torch.float64) for t in inputs]
    outs = []
    for sign in (1, -1):
        moved = [t + sign * eps * u for t, u in zip(inputs, us)]
        outs.append(ctx.tensor_out(ctx.call(*moved, *extra, during=what, **kwargs), shape, what).double())
    numeric = float(((outs[0] - outs[1]) / (2 * eps) * g.double()).sum())
    analytic = float(sum((gr.double() * u).sum() for gr, u in zip(grads, us)))
    gross = float(sum((gr.double() * u).abs().sum() for gr, u in zip(grads, us)))  # before any cancellation
    if not abs(analytic - numeric) <= 1e-4 + 1e-2 * abs(numeric) + 1e-4 * gross:
        raise Fail(T("{what}: your gradients do not belong to your forward: along a random "
                     "direction they give {analytic:.6g}, finite differences of your own "
                     "forward give {numeric:.6g}", what=what, analytic=analytic, numeric=numeric),
                   {"analytic": analytic, "numerical": numeric, "inputs": list(names)})


def sdpa_reference(ctx):
    worst = 0.0
    r = ctx.inputs.randn
    cases = [(torch.float32, None, False, T("float32, no mask")), (torch.float64, "bool", False, T("float64, boolean mask")),
             (torch.float64, None, True, T("float64, is_causal=True"))]
    for dtype, mask_kind, causal, label in cases:
        B, H = ctx.inputs.distinct(2, 2, 4)
        L, S, E, Ev = ctx.inputs.distinct(4, 5, 12)
        if causal:
            S = L
        q, k, v = r(B, H, L, E, dtype=dtype), r(B, H, S, E, dtype=dtype), r(B, H, S, Ev, dtype=dtype)
        mask = ctx.inputs.bool_mask(L, S) if mask_kind else None
        g = r(B, H, L, Ev, dtype=dtype)
        kwargs = {"attn_mask": mask} if mask is not None else {}
        if causal:
            kwargs["is_causal"] = True
        what = T("gradients ({label}; {shapes})", label=label, shapes=shape_str(q, k, v))
        result = ctx.call(q, k, v, wrt=(0, 1, 2), grad_output=g, during=what, **kwargs)
        ctx.tensor_out(result, (B, H, L, Ev), what)
        fn = lambda a, b, c: scaled_dot_product_attention(a, b, c, mask, is_causal=causal)
        ref64 = _ref_grads(fn, [q.double(), k.double(), v.double()], g.double())
        same = _ref_grads(fn, [q, k, v], g)
        try:
            worst = max(worst, compare_grads(result, SDPA_NAMES, ref64, same, dtype, what))
        except Fail as miss:
            variants_of = lambda a, b, c: sdpa_variants(a, b, c, mask, causal)
            raise explained_by_known_bug(ctx, miss, result, SDPA_NAMES, variants_of, [q, k, v], g, dtype, what)
        if dtype == torch.float64:
            directional_check(ctx, [q, k, v], [], result.grads, g, SDPA_NAMES, kwargs, (B, H, L, Ev), what)
    return T("gradients for query, key and value match the reference (max error {worst:.2g})", worst=worst)


# (step, relative tolerance, absolute tolerance): the tight tier is torch.autograd.gradcheck's; a
# forward that computes in float32 internally (common in real code, and correct) makes float64
# finite differences noisy at that step, so a miss is retried with a step where float32 rounding is
# far below the difference; a wrong backward misses both.
GRADCHECK_TIERS = ((1e-6, 1e-3, 1e-5), (1e-2, 2e-2, 2e-4))


def gradcheck(ctx, call_forward, call_backward, inputs, names, stacked: bool, what: str):
    """Central differences from child forwards vs. the child's analytic VJPs, judged here."""
    try:
        return _gradcheck(ctx, call_forward, call_backward, inputs, names, stacked, what, *GRADCHECK_TIERS[0])
    except Fail:
        _gradcheck(ctx, call_forward, call_backward, inputs, names, stacked, what, *GRADCHECK_TIERS[1])
        return "float32-internal"


def _gradcheck(ctx, call_forward, call_backward, inputs, names, stacked, what, eps, rtol, atol):
    sizes = [t.numel() for t in inputs]
    n = sum(sizes)
    plus, minus = [], []
    for i, t in enumerate(inputs):
        for j in range(t.numel()):
            for sign, bucket in ((1, plus), (-1, minus)):
                moved = [x.clone() for x in inputs]
                moved[i].view(-1)[j] += sign * eps
                bucket.append(moved)
    if stacked:
        cols = [torch.stack([m[i] for m in plus + minus]) for i in range(len(inputs))]
        out = call_forward(cols)
        outs_plus, outs_minus = out[:n], out[n:]
    else:
        outs_plus = torch.stack([call_forward(m) for m in plus])
        outs_minus = torch.stack([call_forward(m) for m in minus])
    jac = ((outs_plus - outs_minus) / (2 * eps)).reshape(n, -1)   # (inputs, outputs)
    for trial in range(2):
        g = ctx.inputs.randn(*outs_plus.shape[1:], dtype=torch.float64)
        grads = call_backward(g)
        numeric = jac @ g.reshape(-1)
        analytic = torch.cat([gr.reshape(-1).double() for gr in grads])
        diff = (analytic - numeric).abs()
        bad = diff > atol + rtol * numeric.abs()
        if bad.any() or not torch.isfinite(analytic).all():
            idx = int(bad.nonzero()[0]) if bad.any() else 0
            which = next(i for i, c in enumerate(torch.tensor(sizes).cumsum(0).tolist()) if idx < c)
            raise Fail(T("{what}: gradcheck fails for {name}: your backward gives {analytic:.6g} where "
                         "finite differences of your own forward give {numeric:.6g}{hint}",
                         what=what, name=names[which], analytic=float(analytic[idx]),
                         numeric=float(numeric[idx]), hint=NOISE_HINT),
                       {"input": names[which], "analytic": float(analytic[idx]), "numerical": float(numeric[idx])})


def sdpa_gradcheck(ctx):
    r = ctx.inputs.randn
    q, k, v = r(1, 3, 4, dtype=torch.float64), r(1, 5, 4, dtype=torch.float64), r(1, 5, 2, dtype=torch.float64)
    stacked = ctx.passed_check("batch.independent")
    what = T("gradcheck in float64 on {shapes}", shapes=shape_str(q, k, v))

    def forward(args):
        res = ctx.call(*args, during=what)
        return ctx.tensor_out(res, tuple(args[0].shape[:-2]) + (3, 2), what).double()

    def backward(g):
        res = ctx.call(q, k, v, wrt=(0, 1, 2), grad_output=g, during=what)
        ctx.tensor_out(res, (1, 3, 2), what)
        return _grads_or_fail(res, SDPA_NAMES, what, [q, k, v])

    tier = gradcheck(ctx, forward, backward, [q, k, v], SDPA_NAMES, stacked, what)
    how = T("perturbations stacked in one call") if stacked else T("one call per perturbation")
    if tier == "float32-internal":
        return T("torch.autograd.gradcheck-style comparison passes in float64 ({how}; your forward computes "
                 "in float32 inside, so finite differences used a step of 1e-2)", how=how)
    return T("torch.autograd.gradcheck-style comparison passes in float64 ({how})", how=how)


def _grads_or_fail(res, names, what, inputs=None):
    """The child's gradients; for gradcheck an input with no gradient (autograd's None for an input
    the output does not use) counts as a zero one, which finite differences then confirm or refute."""
    if res.grads is None or (inputs is None and any(g is None for g in res.grads)) or \
            all(g is None for g in res.grads):
        missing = names if res.grads is None else [n for n, g in zip(names, res.grads) if g is None]
        raise Fail(T("{what}: no gradient reaches {value}: your output is not connected to "
                     "the autograd graph (.detach(), .data, numpy or torch.tensor(...) in "
                     "the path)", what=what, value=', '.join(missing)), {"no_gradient": True})
    if inputs is None:
        return res.grads
    return [torch.zeros_like(t) if g is None else g for g, t in zip(res.grads, inputs)]


def mha_reference(ctx):
    from .masks import mha_dims, mha_inputs
    B, H, dk, L, S = mha_dims(ctx)
    x_q, x_kv, ws = mha_inputs(ctx, B, L, S, H * dk, dtype=torch.float64)
    g = ctx.inputs.randn(B, L, H * dk, dtype=torch.float64)
    what = T("gradients (float64, B={B}, L={L}, S={S}, d_model={d_model}, {H} heads)", B=B, L=L, S=S,
             d_model=H * dk, H=H)
    result = ctx.call(x_q, x_kv, *ws, H, wrt=tuple(range(6)), grad_output=g, during=what)
    ctx.tensor_out(result, (B, L, H * dk), what)
    fn = lambda *t: multi_head_attention(*t, H)
    ref = _ref_grads(fn, [x_q, x_kv, *ws], g)
    try:
        worst = compare_grads(result, MHA_NAMES, ref, ref, torch.float64, what)
    except Fail as miss:
        variants_of = lambda a, b, *w: mha_variants(a, b, w, H)
        raise explained_by_known_bug(ctx, miss, result, MHA_NAMES, variants_of, [x_q, x_kv, *ws], g,
                                     torch.float64, what)
    directional_check(ctx, [x_q, x_kv, *ws], [H], result.grads, g, MHA_NAMES, {}, (B, L, H * dk), what)
    return T("gradients for the inputs and all four weight matrices match the reference (max "
             "error {worst:.2g})", worst=worst)


def mha_gradcheck(ctx):
    """Fast-mode gradcheck (torch's fast_mode idea): per input, a random direction u and a random
    upstream g; ⟨g, (f(x + εu) − f(x − εu)) / 2ε⟩ from child forwards must equal ⟨grad, u⟩ from the
    child's backward. Two forwards per input instead of two per input element; judged here."""
    r = ctx.inputs.randn
    H, D, L, S = 2, 6, 3, 4
    inputs = [r(1, L, D, dtype=torch.float64), r(1, S, D, dtype=torch.float64),
              *(r(D, D, dtype=torch.float64, std=0.5) for _ in range(4))]
    what = T("gradcheck in float64 (L={L}, S={S}, d_model={D}, {H} heads)", L=L, S=S, D=D, H=H)
    g = r(1, L, D, dtype=torch.float64)
    res = ctx.call(*inputs, H, wrt=tuple(range(6)), grad_output=g, during=what)
    ctx.tensor_out(res, (1, L, D), what)
    grads = _grads_or_fail(res, MHA_NAMES, what, inputs)
    for i, name in enumerate(MHA_NAMES):
        u = r(*inputs[i].shape, dtype=torch.float64)
        analytic = float((grads[i].double() * u).sum())
        for eps, rtol, atol in GRADCHECK_TIERS:
            outs = []
            for sign in (1, -1):
                moved = list(inputs)
                moved[i] = inputs[i] + sign * eps * u
                outs.append(ctx.tensor_out(ctx.call(*moved, H, during=what), (1, L, D), what).double())
            numeric = float(((outs[0] - outs[1]) / (2 * eps) * g).sum())
            if abs(analytic - numeric) <= atol + rtol * abs(numeric):
                break
        if not abs(analytic - numeric) <= atol + rtol * abs(numeric):
            raise Fail(T("{what}: gradcheck fails for {name}: your backward gives a "
                         "directional derivative of {analytic:.6g} where finite differences "
                         "of your own forward give {numeric:.6g}{hint}",
                         what=what, name=name, analytic=analytic, numeric=numeric, hint=NOISE_HINT),
                       {"input": name, "analytic": analytic, "numerical": numeric})
    return T("gradcheck (fast mode, every input) of your backward against finite differences "
             "passes in float64")
