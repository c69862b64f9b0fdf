"""Grading the answers a student types in a structure: a matrix, a shape, a big-O expression.

* ``matrix`` (``ask: matrix``): a list of rows of numbers (each read like a numeric answer, so
  ``0,5`` in Russian), of the result's size. Partial credit: the share of entries within the
  tolerance; a matrix that is one listed mistake everywhere gets that mistake's feedback, and
  otherwise the feedback names the wrong entries (not their values). ``ask: entry``: one number,
  graded like a numeric question against the entry's key and the same entry of each mistake.
* ``shape``: a shape as text or a list of sizes (see :mod:`questions.shapes`); all or nothing.
* ``big_o``: an expression (see :mod:`questions.bigo`); all or nothing, and a wrong one is told
  which variables it grows wrongly in.
* ``expression``: a formula (see :mod:`questions.symbolic`); any equivalent form is right, a
  listed mistake gets its feedback; all or nothing.
"""
from __future__ import annotations

from grader.i18n import T, joined

from . import bigo, handcalc, shapes, symbolic
from .messages import CORRECT, INCORRECT, bank_text, number


def grade_typed(question, env: dict, answer, lang: str, result, top: float, explanation):
    from .answers import AnswerFormatError, _graded_number, _verdict_and, parse_number
    d, kind = question.data, question.kind
    if kind == "matrix":
        tol = handcalc.tolerance(d)
        key = handcalc.result(d, env)
        mistakes = [(handcalc.compute(handcalc.mistake_settings(d, m), env), m["feedback"])
                    for m in d.get("mistakes") or []]
        if d.get("ask", "matrix") == "entry":
            pick = lambda m: handcalc.asked(d, env, m)  # noqa: E731
            return _graded_number(parse_number(answer, lang), pick(key), {"abs": tol},
                                  [(pick(m), f) for m, f in mistakes], env, result, top, explanation)
        grid = read_matrix(answer, len(key), len(key[0]), lang, parse_number, AnswerFormatError)
        wrong = [(i + 1, j + 1) for i, row in enumerate(key) for j, x in enumerate(row)
                 if abs(grid[i][j] - x) > tol + 1e-12]
        total = len(key) * len(key[0])
        if not wrong:
            return result(1.0, True, T(CORRECT), matrix=grid)
        lines = [T("{got} of {total} entries are right; wrong at (row, column): {cells}.",
                   got=total - len(wrong), total=total, cells=", ".join(f"({i}, {j})" for i, j in wrong))]
        known = next((f for m, f in mistakes if handcalc.close(grid, m, tol)), None)
        if known is not None:
            lines.append(bank_text(known, env))
        elif d["answer"].get("result") == "weights":
            off = next(((i + 1, sum(row)) for i, row in enumerate(grid) if abs(sum(row) - 1) > tol * len(row)), None)
            if off:
                lines.append(T("Each row of weights sums to 1 (a softmax over the keys); your row {row} "
                               "sums to {total}.", row=off[0], total=number(round(off[1], 4))))
        return result((total - len(wrong)) / total, False, joined(lines, "\n"), matrix=grid)
    if kind == "shape":
        try:
            got = shapes.parse_shape(answer)
        except shapes.ShapeError as exc:
            raise AnswerFormatError(str(exc)) from None
        want = shapes.shape_value(d["answer"], env)
        if got == want:
            return result(1.0, True, T(CORRECT), shape=list(got))
        for m in d.get("mistakes") or []:
            if got == shapes.shape_value(m["value"], env):
                return result(0.0, False, _verdict_and(T(INCORRECT), bank_text(m["feedback"], env)),
                              shape=list(got))
        hint = T("Not correct: the result has a different number of dimensions than your {n}.", n=len(got)) \
            if len(got) != len(want) else \
            T("Not correct: the size is wrong in {n} of the {total} dimensions.",
              n=sum(a != b for a, b in zip(got, want)), total=len(want))
        return result(0.0, False, hint, shape=list(got))
    if kind == "big_o":
        variables = d["variables"]
        try:
            got = bigo.canonical(answer if isinstance(answer, str) else "", variables)
        except bigo.BigOError as exc:
            raise AnswerFormatError(str(exc)) from None
        want = bigo.canonical(d["answer"], variables)
        written = "O(" + bigo.text_of(got) + ")"
        if got == want:
            return result(1.0, True, T(CORRECT), read_as=written)
        for m in d.get("mistakes") or []:
            if got == bigo.canonical(m["value"], variables):
                return result(0.0, False, _verdict_and(T(INCORRECT), bank_text(m["feedback"], env)),
                              read_as=written)
        off = [v for v in variables if bigo.leading(got, v) != bigo.leading(want, v)]
        hint = T("Not correct: read as {read}; check how it grows with {names}.", read=written,
                 names=", ".join(off)) if off else \
            T("Not correct: read as {read}; the terms are not the right ones.", read=written)
        return result(0.0, False, hint, read_as=written)
    if kind == "expression":
        variables = d["variables"]
        try:
            got = symbolic.values(symbolic.parse(answer, variables), variables)
        except symbolic.ExpressionError as exc:
            raise AnswerFormatError(str(exc)) from None
        if symbolic.same(got, symbolic.values(symbolic.parse(d["answer"], variables), variables)):
            return result(1.0, True, T(CORRECT))
        for m in d.get("mistakes") or []:
            if symbolic.same(got, symbolic.values(symbolic.parse(m["value"], variables), variables)):
                return result(0.0, False, _verdict_and(T(INCORRECT), bank_text(m["feedback"], env)))
        return result(0.0, False, T(INCORRECT))
    raise AnswerFormatError(f"cannot grade a {kind} question")


def read_matrix(answer, rows: int, cols: int, lang: str, parse_number, error) -> list[list[float]]:
    """A rows × cols list of numbers; each entry read as a numeric answer is."""
    if not isinstance(answer, (list, tuple)) or len(answer) != rows or not all(
            isinstance(row, (list, tuple)) and len(row) == cols for row in answer):
        raise error(f"expected a {rows} × {cols} matrix: {rows} rows of {cols} numbers")
    try:
        return [[parse_number(x, lang) for x in row] for row in answer]
    except error as exc:
        raise error(f"an entry of the matrix: {exc}") from None


def solution_of(question, env: dict) -> dict:
    d = question.data
    if question.kind == "matrix":
        key = handcalc.result(d, env)
        if d.get("ask", "matrix") == "entry":
            return {"value": handcalc.asked(d, env, key), "tolerance": {"abs": handcalc.tolerance(d)}}
        # rounded for people (the preview page); grading and the exports use the exact values
        return {"matrix": [[round(x, 6) for x in row] for row in key], "tolerance": {"abs": handcalc.tolerance(d)}}
    if question.kind == "shape":
        return {"shape": list(shapes.shape_value(d["answer"], env))}
    if question.kind == "expression":
        return {"formula": d["answer"], "variables": list(d["variables"])}
    return {"expression": d["answer"], "variables": list(d["variables"])}
