"""Grading the short-code questions: run the snippet in the sandbox, compare in the parent.

The student's function is called on inputs built here (seeded by the variant), and its
output is compared with the trusted reference from :mod:`questions.references`. The child
never sees the reference and never decides the verdict.
"""
from __future__ import annotations

import math

import torch

from grader.i18n import T

from . import references
from .model import Question
from .variants import code_cases


def _describe(function: str, args: list) -> str:
    shown = [f"<{str(a.dtype).replace('torch.', '')} tensor {tuple(a.shape)}>"
             if isinstance(a, torch.Tensor) else repr(a) for a in args]
    return f"{function}({', '.join(shown)})"


# How much of a failing case's tensors the feedback shows: a corner of the last two axes,
# rounded, enough to see a wrong scale or a mask off by one without a wall of numbers.
PREVIEW_ROWS, PREVIEW_COLS, PREVIEW_DIGITS = 4, 6, 4


def preview(value) -> dict:
    """A small, rounded, JSON-ready view of one value for the feedback's expected-vs-got.

    A tensor shows its shape, dtype and the corner ``[0, ..., :4, :6]`` (``index``) as ``rows`` (always a
    list of rows, whatever the tensor's rank); anything else only its type. Built in the parent from tensors it holds (the reference's output, or the child's
    output after it was received and checked), never from the child's own description.
    """
    if not isinstance(value, torch.Tensor):
        return {"type": type(value).__name__}
    if value.is_complex():  # no JSON number for it, and never what a question asks for
        return {"type": "tensor", "shape": list(value.shape), "dtype": str(value.dtype).replace("torch.", "")}
    corner = value.detach()
    index = []
    while corner.dim() > 2:
        corner, index = corner[0], index + ["0"]
    limits = (PREVIEW_ROWS, PREVIEW_COLS)[-corner.dim():] if corner.dim() else ()
    index += [f":{n}" if size > n else ":" for size, n in zip(corner.shape, limits)]
    corner = corner[tuple(slice(n) for n in limits)]
    if corner.is_floating_point():
        # -inf (a masked score) and NaN as text: JSON has no such numbers (PostgreSQL refuses them)
        values = _finite_or_text(torch.round(corner.double(), decimals=PREVIEW_DIGITS).tolist())
    else:
        values = corner.tolist()
    rows = values if corner.dim() == 2 else [values] if corner.dim() == 1 else [[values]]
    return {"shape": list(value.shape), "dtype": str(value.dtype).replace("torch.", ""),
            # which part is shown, numpy-style; empty when it is the whole tensor
            "index": f"[{', '.join(index)}]" if any(i != ":" for i in index) else "", "rows": rows}


def _finite_or_text(values):
    if isinstance(values, list):
        return [_finite_or_text(v) for v in values]
    return values if math.isfinite(values) else str(values)


def _compare(got: torch.Tensor, want: torch.Tensor, compare: dict) -> T | None:
    """None when ``got`` matches ``want``; otherwise why not."""
    if tuple(got.shape) != tuple(want.shape):
        return T("expected shape {want}, got {got}", want=tuple(want.shape), got=tuple(got.shape))
    exact = want.dtype in (torch.bool, torch.int64, torch.int32)
    if compare.get("dtype", exact) and got.dtype != want.dtype:
        return T("expected dtype {want}, got {got}", want=str(want.dtype).replace("torch.", ""),
                 got=str(got.dtype).replace("torch.", ""))
    if exact:
        wrong = (got.to(want.dtype) != want).sum().item()
        if wrong:
            return T("{wrong} of {total} entries are wrong", wrong=wrong, total=want.numel())
        return None
    g, w = got.double(), want.double()
    if not torch.allclose(g, w, atol=compare.get("atol", 1e-5), rtol=compare.get("rtol", 1e-4)):
        finite = torch.isfinite(w) & torch.isfinite(g)
        diff = (g - w)[finite].abs().max().item() if finite.any() else float("inf")
        if not torch.equal(torch.isinf(g), torch.isinf(w)):
            stand_in = torch.isneginf(w) & torch.isfinite(g)
            if stand_in.any() and (g[stand_in] <= -1e4).all() and torch.allclose(
                    g[~stand_in], w[~stand_in], atol=compare.get("atol", 1e-5), rtol=compare.get("rtol", 1e-4)):
                # the -1e9 of many tutorials: right idea, but not what the task asks for
                return T("the hidden entries hold a large finite number ({value:.3g}) instead of −∞ "
                         "(float('-inf')); a finite stand-in still gives them a tiny weight, and a row "
                         "with every key hidden becomes a uniform average instead of having no valid key",
                         value=g[stand_in].max().item())
            diff = float("inf")
        if _columns_instead_of_rows(g, w):
            return T("each column of your result sums to 1 instead of each row: the softmax was taken "
                     "over dim=-2 (the queries) instead of the last axis (the keys)")
        return T("wrong values (largest difference {diff:.3g})", diff=diff)
    return None


def _columns_instead_of_rows(got: torch.Tensor, want: torch.Tensor) -> bool:
    """A softmax over the wrong axis: the expected rows are distributions, the returned columns are."""
    if want.dim() < 2 or not (torch.isfinite(got).all() and torch.isfinite(want).all()):
        return False
    one = torch.ones((), dtype=torch.float64)
    return bool(torch.allclose(want.sum(-1), one, atol=1e-4) and torch.allclose(got.sum(-2), one, atol=1e-4)
                and not torch.allclose(got.sum(-1), one, atol=1e-4))


def _mutated(args, after, params) -> list[str]:
    """The tensor arguments that came back changed (compared here, not in the student's process)."""
    names = [p["name"] for p in params or [] if p["kind"] in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD")]
    sent = [(i, a) for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    changed = []
    for (i, before), now in zip(sent, after or []):
        same = before.dtype == now.dtype and bool(((before == now) | (before.isnan() & now.isnan())).all()) \
            if before.is_floating_point() else torch.equal(before, now)
        if not same:
            changed.append(names[i] if i < len(names) else f"argument {i + 1}")
    return changed


def grade_code(question: Question, seed: int, source: str, *,
               sandbox: str = "auto") -> tuple[float, bool, T, dict]:
    """Returns (fraction of cases passed, all passed, feedback, details); the feedback is a ``T``
    (English, rendered in the reader's language later), ``details`` JSON-ready."""
    from grader.sandbox import SandboxSession  # late: only code questions need the sandbox

    d = question.data
    function, reference = d["function"], references.REFERENCES[d["reference"]]
    compare = d.get("compare") or {}
    cases = code_cases(question, seed)
    results, first_failure, first_why = [], None, None
    with SandboxSession(source, function, level=sandbox) as session:
        loaded = session.load()
        if not loaded.ok:
            why = loaded.error.message if loaded.error else "unknown error"
            return 0.0, False, T("The code did not run: {why}", why=why), {"cases": [], "error": why}
        for args in cases:
            want = reference(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
            call = session.call(*args, echo=True)
            mutated = _mutated(args, call.inputs_after, loaded.params) if call.ok else []
            if not call.ok:
                why = f"{call.error.exc_type or call.error.kind}: {call.error.message}".strip()
            elif mutated:
                why = T("it changed its input {names} in place", names=", ".join(mutated))
            elif call.output is None:
                why = T("expected a tensor, got {got}", got=call.output_type or "None")
            else:
                why = _compare(call.output, want, compare)
            results.append(why is None)
            if why is not None and first_failure is None:
                first_why = why
                first_failure = {
                    "call": _describe(function, args), "why": str(why),
                    "shapes": [list(a.shape) if isinstance(a, torch.Tensor) else repr(a) for a in args],
                    "expected": preview(want),
                    # what came back, as received and checked here; a crash returned nothing
                    "got": preview(call.output) if call.ok and not mutated else None,
                }
    passed = sum(results)
    if first_failure is None:
        return 1.0, True, T("All {total} test calls return the expected result.", total=len(results)), \
            {"cases": results}
    return (passed / len(results), False,
            T("{got} of {total} test calls pass. First failure, {call}: {why}", got=passed,
              total=len(results), call=first_failure["call"], why=first_why),
            {"cases": results, "failure": first_failure})
