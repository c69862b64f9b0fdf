"""Grading the short-code questions: run the snippet in the sandbox, compare in the parent.

The student's function is called on inputs built here (seeded by the variant), and its
output is compared with the trusted reference from :mod:`questions.references`. The child
never sees the reference and never decides the verdict.
"""
from __future__ import annotations

import math

import torch

from . import references
from .messages import msg
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


def _compare(got: torch.Tensor, want: torch.Tensor, compare: dict, lang: str) -> str | None:
    """None when ``got`` matches ``want``; otherwise why not, in ``lang``."""
    if tuple(got.shape) != tuple(want.shape):
        return msg("why_shape", lang, want=tuple(want.shape), got=tuple(got.shape))
    exact = want.dtype in (torch.bool, torch.int64, torch.int32)
    if compare.get("dtype", exact) and got.dtype != want.dtype:
        return msg("why_dtype", lang, want=str(want.dtype).replace("torch.", ""),
                   got=str(got.dtype).replace("torch.", ""))
    if exact:
        wrong = (got.to(want.dtype) != want).sum().item()
        if wrong:
            return msg("why_entries", lang, wrong=wrong, total=want.numel())
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
                return msg("why_finite_mask", lang, value=f"{g[stand_in].max().item():.3g}")
            diff = float("inf")
        return msg("why_values", lang, diff=f"{diff:.3g}")
    return None


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


def grade_code(question: Question, seed: int, source: str, lang: str = "en", *,
               sandbox: str = "auto") -> tuple[float, bool, str, dict]:
    """Returns (fraction of cases passed, all passed, feedback, details)."""
    from grader.sandbox import SandboxSession  # late: only code questions need the sandbox

    d = question.data
    function, reference = d["function"], references.REFERENCES[d["reference"]]
    compare = d.get("compare") or {}
    cases = code_cases(question, seed)
    results, first_failure = [], None
    with SandboxSession(source, function, level=sandbox) as session:
        loaded = session.load()
        if not loaded.ok:
            why = loaded.error.message if loaded.error else "unknown error"
            return 0.0, False, msg("code_error", lang, why=why), {"cases": [], "error": why}
        for args in cases:
            want = reference(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
            call = session.call(*args, echo=True)
            mutated = _mutated(args, call.inputs_after, loaded.params) if call.ok else []
            if not call.ok:
                why = f"{call.error.exc_type or call.error.kind}: {call.error.message}".strip()
            elif mutated:
                why = msg("why_mutated", lang, names=", ".join(mutated))
            elif call.output is None:
                why = msg("why_type", lang, got=call.output_type or "None")
            else:
                why = _compare(call.output, want, compare, lang)
            results.append(why is None)
            if why is not None and first_failure is None:
                first_failure = {
                    "call": _describe(function, args), "why": why,
                    "shapes": [list(a.shape) if isinstance(a, torch.Tensor) else repr(a) for a in args],
                    "expected": preview(want),
                    # what came back, as received and checked here; a crash returned nothing
                    "got": preview(call.output) if call.ok and not mutated else None,
                }
    passed = sum(results)
    if first_failure is None:
        return 1.0, True, msg("code_pass", lang, total=len(results)), {"cases": results}
    return (passed / len(results), False,
            msg("code_fail", lang, got=passed, total=len(results), call=first_failure["call"],
                why=first_failure["why"]),
            {"cases": results, "failure": first_failure})
