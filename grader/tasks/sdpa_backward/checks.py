"""Checks of the ``sdpa_backward`` task: (dQ, dK, dV) of attention written by hand, without autograd.

The parent computes the reference gradients with its own autograd through the float64 reference
attention, and names a miss with the known wrong backward passes of ``backward_bugs``. dQ, dK and
dV are graded on their own: ``output.dQ``, ``output.dK`` and ``output.dV`` judge one gradient each,
and the property checks (jacobian, scale, mask, causal) judge the gradients the output checks
found right, so one wrong gradient costs its own points and nothing more. A function that raises
(or returns a wrong shape) when L != S is run again on the same case cut to L = S: a gradient
whose formula is transposed there is that failure's cause, and the others are judged there.
Autograd is forbidden (``autograd_ban``), and the gradients are also graded at a size where
numerical differentiation cannot keep up (``at_scale``).
"""
from __future__ import annotations

import weakref

import torch

from reference_impl import scaled_dot_product_attention
from . import bugs as backward_bugs
from ...checks.base import Fail, StudentFailure
from ...checks.calls import sdpa_kwargs
from ...checks.tolerance import GRAD_FLOOR_FACTOR, GRAD_MULTIPLIER
from ...checks.tuples import Outputs, assess_parts, parts_failure
from ...i18n import T

NAMES = backward_bugs.NAMES
OUTPUT_CHECKS = tuple(f"output.{name}" for name in NAMES)
SPEC = Outputs(names=NAMES, explain=backward_bugs.CATALOGUE.explain, multiplier=GRAD_MULTIPLIER,
               floor_factor=GRAD_FLOOR_FACTOR)


def reference_grads(q, k, v, g, attn_mask=None, is_causal=False, scale=None):
    """(dQ, dK, dV) by the parent's own autograd through the reference attention."""
    leaves = [t.detach().clone().requires_grad_(True) for t in (q, k, v)]
    out = scaled_dot_product_attention(*leaves, attn_mask, is_causal=is_causal, scale=scale)
    return tuple(torch.autograd.grad((out * g).sum(), leaves))


def diagnosis_reference(args, kwargs, scale=None) -> tuple:
    """The right (dQ, dK, dV) of one call ``(q, k, v, grad_out)``, in float64, with ``scale`` where it
    is given: the task's ``Grading.reference`` (grader/checks/diagnosis.py)."""
    q, k, v, g = (t.double() for t in args[:4])
    mask = kwargs.get("attn_mask")
    if mask is not None and mask.is_floating_point():
        mask = mask.double()
    return reference_grads(q, k, v, g, mask, bool(kwargs.get("is_causal")),
                           kwargs.get("scale") if scale is None else scale)


def assess(ctx, result, case, what, parts, only=None):
    """``tuples.assess_parts`` for one call's answer to ``case`` (``only``: name only those bugs)."""
    q, k, v, g, attn_mask, is_causal, scale = case
    mask64 = attn_mask if attn_mask is None or attn_mask.dtype == torch.bool else attn_mask.double()
    ref64 = reference_grads(q.double(), k.double(), v.double(), g.double(), mask64, is_causal, scale)
    return assess_parts(
        ctx, SPEC, result, q.dtype, shapes=[q.shape, k.shape, v.shape], ref64=ref64,
        same=ref64 if q.dtype == torch.float64 else reference_grads(q, k, v, g, attn_mask, is_causal, scale),
        variants=(lambda: backward_bugs.hand_written(q, k, v, g, attn_mask, is_causal, scale, only)[1],
                  lambda: backward_bugs.forward_bugs(q, k, v, g, attn_mask, is_causal, scale, only)),
        what=what, parts=parts, dtype_bug="grads_wrong_dtype")


def _call(ctx, case, what, answers=None):
    """The student's answer to ``case``; with ``answers`` (a dict), each case is asked once and its
    answer (or failure) kept for the next check that judges it."""
    key = str(what)
    if answers is not None and key in answers:
        kept = answers[key]
        if isinstance(kept, StudentFailure):
            raise kept
        return kept
    q, k, v, g, attn_mask, is_causal, scale = case
    try:
        result = ctx.call(q, k, v, g, during=what, **sdpa_kwargs(attn_mask, is_causal, scale))
    except StudentFailure as exc:
        if answers is not None and not exc.unanswered:
            answers[key] = exc
        raise
    if answers is not None:
        answers[key] = result
    return result


def run_backward(ctx, q, k, v, g, attn_mask=None, is_causal=False, scale=None, *, what: str,
                 parts: tuple = NAMES, answers: dict | None = None) -> float:
    """Call, judge the gradients in ``parts`` against the parent's autograd, name a miss. Returns the
    worst error; raises Fail (or StudentFailure) on a miss."""
    case = (q, k, v, g, attn_mask, is_causal, scale)
    try:
        _, worst, failures = assess(ctx, _call(ctx, case, what, answers), case, what, parts)
    except StudentFailure as exc:
        if exc.unanswered or q.size(-2) == k.size(-2):
            raise
        return _judged_square(ctx, case, what, parts, exc, exc.describe(), answers)
    except Fail as miss:
        if "output" not in miss.details or q.size(-2) == k.size(-2):
            raise
        return _judged_square(ctx, case, what, parts, miss, miss.message, answers)
    if failures:
        raise parts_failure(what, failures, explain=SPEC.explain)
    return worst


def _judged_square(ctx, case, what, parts, original, said, answers=None) -> float:
    """The function raised (or returned a wrong shape) with L != S: run the case cut to L = S. If a
    gradient there is transposed (a named bug), that is why, and the other gradients are judged
    there; otherwise the original failure stands."""
    square = _square(case)
    n = square[0].size(-2)
    where = T("{what}, cut to L = S = {n}", what=what, n=n)
    try:
        _, worst, failures = assess(ctx, _call(ctx, square, where, answers), square, where, NAMES)
    except (StudentFailure, Fail):
        raise original from None
    culprits = {name: cause for name, cause, _, _ in failures if cause in backward_bugs.SHAPE_BUGS}
    if not culprits:
        raise original
    mine = [f for f in failures if f[0] in parts]
    if mine:
        raise parts_failure(where, mine, explain=SPEC.explain,
                            prefix=T("with L != S your function fails ({said}); here ", said=said))
    return worst


def _square(case):
    """The same case with the longer of L and S cut to the shorter; every row keeps a key."""
    q, k, v, g, attn_mask, is_causal, scale = case
    n = min(q.size(-2), k.size(-2))
    q, g, k, v = q[..., :n, :], g[..., :n, :], k[..., :n, :], v[..., :n, :]
    if attn_mask is not None:
        attn_mask = attn_mask[..., :n, :n].clone()
        eye = torch.eye(n, dtype=torch.bool).expand_as(attn_mask)
        if attn_mask.dtype == torch.bool:
            attn_mask |= eye & ~attn_mask.any(-1, keepdim=True)
        else:
            dead = torch.isinf(attn_mask).all(-1, keepdim=True) & eye
            attn_mask = attn_mask.masked_fill(dead, 0.0)
    return q, k, v, g, attn_mask, is_causal, scale


# What each grading's output checks found per gradient: the bug named, or None when unexplained.
_NAMED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def named_bugs(ctx) -> set:
    """The bugs the output checks named (for the gradients they found wrong)."""
    return {name for name in _NAMED.get(ctx, {}).values() if name}


def judged_parts(ctx) -> tuple:
    """The gradients the later checks judge: those the output checks found right, or wrong by a named
    bug (charged once by causes.py); not those wrong for no known reason, which would fail every
    check again. Needs the output checks (``Check(needs=OUTPUT_CHECKS)``)."""
    named = _NAMED.get(ctx, {})
    return tuple(name for name, check in zip(NAMES, OUTPUT_CHECKS) if ctx.passed_check(check) or named.get(name))


def _right(ctx) -> tuple:
    """``judged_parts``, or all three when none qualifies (the property checks still say what fails)."""
    return judged_parts(ctx) or NAMES


def _noting(parts) -> str:
    return "" if parts == NAMES else T(" (judged on {names}: the others are wrong in the output checks)",
                                       names=", ".join(parts))


# ---- inputs -----------------------------------------------------------------------------
def _case(ctx, L, S, E, Ev, dtype=torch.float64, batch=None):
    r = ctx.inputs.randn
    batch = batch or tuple(ctx.inputs.distinct(2, 2, 4))
    return r(*batch, L, E, dtype=dtype), r(*batch, S, E, dtype=dtype), r(*batch, S, Ev, dtype=dtype), \
        r(*batch, L, Ev, dtype=dtype)


def _dims(ctx):
    return ctx.inputs.distinct(4, 5, 12)   # L, S, E, Ev all distinct


# ---- checks -----------------------------------------------------------------------------
# Each grading's output cases, drawn and asked once: output.dQ, output.dK and output.dV judge the
# same answers, each its own gradient (three checks, not three times the calls).
_OUTPUT_CASES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _output_cases(ctx):
    if ctx not in _OUTPUT_CASES:
        L, S, E, Ev = _dims(ctx)
        N = ctx.inputs.randint(2, 5)
        n = ctx.inputs.randint(5, 12)
        cases = [(_case(ctx, L, S, E, Ev, torch.float32),
                  T("4-D float32 inputs (L={L}, S={S}, E={E}, Ev={Ev})", L=L, S=S, E=E, Ev=Ev)),
                 (_case(ctx, L, S, E, Ev, torch.float32, batch=(N,)),
                  T("3-D float32 inputs (N={N}, L={L}, S={S})", N=N, L=L, S=S)),
                 (_case(ctx, n, n, E, Ev), T("self-attention shapes (L = S = {L})", L=n))]
        _OUTPUT_CASES[ctx] = (cases, {})
    return _OUTPUT_CASES[ctx]


def output_check(name: str):
    """``output.<name>``: one gradient on 4-D and 3-D float32 inputs with L != S, and float64 ones with
    L = S (where a transposed formula keeps the shapes: only the values tell). Every other check is
    float64 with L != S."""
    def check(ctx):
        cases, answers = _output_cases(ctx)
        try:
            worst = max(run_backward(ctx, *args, what=what, parts=(name,), answers=answers)
                        for args, what in cases)
        except Fail as miss:
            _NAMED.setdefault(ctx, {})[name] = (miss.details.get("causes") or {}).get(name) or \
                miss.details.get("diagnosis")
            raise
        return T("{name} matches autograd's on 3-D and 4-D inputs, float32 and float64, L != S and L = S "
                 "(max error {worst:.2g})", name=name, worst=worst)
    return check


def dtype_case(dtype):
    """``dtype.*``: every gradient comes back in the inputs' dtype. Shapes and values are the output
    checks' (here L = S, so a transposed formula answers)."""
    def check(ctx):
        L, E, Ev = ctx.inputs.distinct(3, 5, 12)
        q, k, v, g = _case(ctx, L, L, E, Ev, dtype)
        result = ctx.call(q, k, v, g, during=T("{dtype} inputs", dtype=dtype))
        got = result.output
        if not isinstance(got, tuple) or len(got) != 3 or not all(isinstance(t, torch.Tensor) for t in got):
            ctx.tuple_out(result, [q.shape, k.shape, v.shape], NAMES)  # says what came back instead
        for name, out in zip(NAMES, got):
            if out.dtype != dtype:
                raise Fail(T("for {want} inputs your {name} is {got}: return the inputs' dtype",
                             want=str(dtype).replace("torch.", ""), name=name,
                             got=str(out.dtype).replace("torch.", "")),
                           {"output": name, "output_dtype": str(out.dtype), "diagnosis": "grads_wrong_dtype"})
        return T("{count} {value} tensors", count=3, value=str(dtype).replace("torch.", ""))
    return check


def jacobian(ctx):
    """Large scores (peaked rows) make the −ppᵀ term of the softmax Jacobian dominate."""
    parts = _right(ctx)
    L, S, E, Ev = _dims(ctx)
    q, k, v, g = _case(ctx, L, S, E, Ev)
    run_backward(ctx, q * 2, k, v, g, what=T("peaked attention rows (query scaled by 2, L={L}, S={S})", L=L, S=S),
                 parts=parts)
    return T("the softmax backward uses the full Jacobian diag(p) − ppᵀ") + _noting(parts)


def scale_default(ctx):
    parts = _right(ctx)
    L, S, Ev = ctx.inputs.distinct(3, 5, 10)
    E = ctx.inputs.randint(24, 40)   # a large d_k: a missing 1/√d_k is far off
    run_backward(ctx, *_case(ctx, L, S, E, Ev), what=T("default scale 1/√{E}", E=E), parts=parts)
    return T("dQ and dK carry the default scale 1/√d_k") + _noting(parts)


def scale_argument(ctx):
    parts = _right(ctx)
    L, S, E, Ev = _dims(ctx)
    value = round(ctx.inputs.uniform(0.15, 0.6), 3)
    run_backward(ctx, *_case(ctx, L, S, E, Ev), scale=value, what=T("scale={value}", value=value), parts=parts)
    return T("the scale= argument is used in the forward and in dQ, dK (scale={value})", value=value) + \
        _noting(parts)


def mask_bool(ctx):
    parts = _right(ctx)
    L, S, E, Ev = _dims(ctx)
    mask = ctx.inputs.bool_mask(L, S)
    run_backward(ctx, *_case(ctx, L, S, E, Ev), attn_mask=mask, what=T("boolean mask ({L}, {S})", L=L, S=S),
                 parts=parts)
    return T("a boolean mask hides its keys in the forward and in the backward") + _noting(parts)


def mask_float(ctx):
    parts = _right(ctx)
    L, S, E, Ev = _dims(ctx)
    mask = ctx.inputs.float_mask(L, S, dtype=torch.float64)
    run_backward(ctx, *_case(ctx, L, S, E, Ev), attn_mask=mask,
                 what=T("float (additive) mask ({L}, {S})", L=L, S=S), parts=parts)
    return T("a float mask is added to the scaled scores and handled in the backward") + _noting(parts)


def causal_square(ctx):
    parts = _right(ctx)
    L, E, Ev = ctx.inputs.distinct(3, 5, 12)
    run_backward(ctx, *_case(ctx, L, L, E, Ev), is_causal=True, what=T("is_causal=True, L = S = {L}", L=L),
                 parts=parts)
    return T("is_causal=True hides the future in the backward too") + _noting(parts)


def causal_rectangular(ctx):
    parts = _right(ctx)
    L, S = sorted(ctx.inputs.distinct(2, 5, 12))
    E, Ev = ctx.inputs.distinct(2, 5, 12)
    run_backward(ctx, *_case(ctx, L, S, E, Ev), is_causal=True,
                 what=T("is_causal=True, L={L} < S={S}", L=L, S=S), parts=parts)
    return T("the causal mask is aligned top-left (ones(L, S).tril()) when L != S") + _noting(parts)
