"""The ``matrix`` kind: a small attention computed by hand, from matrices drawn per variant.

A question names small integer matrices (``matrices: {Q: {shape: [2, 2], values: [-1, 0, 1, 2]}}``)
and what to compute from them (``answer: {result: output, scale: "sqrt(2)"}``): the scores
QKᵀ/scale, the weights softmax(scores) or the output weights·V, with an optional causal mask.
The student answers the whole matrix (``ask: matrix``, per-entry partial credit) or one entry
chosen per variant (``ask: entry``, the placeholders ``{row}`` and ``{col}``, counted from 1).

Each ``mistakes`` entry changes one or more of the computation's settings (``scale: 1`` forgot
the scale, ``axis: queries`` took the softmax down the columns, the ``dim=-2`` bug,
``mask: after`` zeroed the weights after the softmax, ``mask: none``, ``result: weights``) and
says what went wrong. Draws are kept only where the key and every mistake differ beyond the
tolerance (in the asked entry, for ``ask: entry``), so a wrong answer never gets the feedback
of another slip. Everything is pure Python on a few numbers: loading, validating and grading
need no torch.
"""
from __future__ import annotations

import math
import random

from . import expr

RESULTS = ("scores", "weights", "output")
AXES = ("keys", "queries")        # softmax along a row (dim=-1, right) or down a column (dim=-2)
MASKS = ("none", "causal", "after")  # "after": the softmax first, then masked weights set to 0
SETTINGS = {"result", "scale", "axis", "mask"}
DEFAULT_DRAWS = 24
MAX_DRAWS = 200
MAX_SIDE = 4


def matrix_text(value) -> str:
    """A matrix as a PyTorch literal: ``[[1, 0], [2, -1]]`` (integers only, so every language
    writes it the same way)."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(matrix_text(v) for v in value) + "]"
    return str(value)


# -- the computation -------------------------------------------------------------------------

def _matmul(a, b):
    return [[sum(x * y for x, y in zip(row, col)) for col in zip(*b)] for row in a]


def _transpose(a):
    return [list(col) for col in zip(*a)]


def _softmax_rows(rows):
    out = []
    for row in rows:
        finite = [x for x in row if x != -math.inf]
        top = max(finite)
        exps = [0.0 if x == -math.inf else math.exp(x - top) for x in row]
        total = sum(exps)
        out.append([e / total for e in exps])
    return out


def compute(settings: dict, env: dict) -> list[list[float]]:
    """``settings`` (result, scale, axis, mask) applied to the matrices Q, K, V in ``env``."""
    q, k = env["Q"], env["K"]
    scale = float(expr.evaluate(settings.get("scale", 1), env))
    scores = [[x / scale for x in row] for row in _matmul(q, _transpose(k))]
    mask = settings.get("mask", "none")
    if settings.get("result", "output") == "scores":
        return scores
    if mask == "causal":
        scores = [[x if j <= i else -math.inf for j, x in enumerate(row)] for i, row in enumerate(scores)]
    if settings.get("axis", "keys") == "keys":
        weights = _softmax_rows(scores)
    else:  # softmax(dim=-2): each column sums to one
        weights = _transpose(_softmax_rows(_transpose(scores)))
    if mask == "after":
        weights = [[w if j <= i else 0.0 for j, w in enumerate(row)] for i, row in enumerate(weights)]
    if settings.get("result", "output") == "weights":
        return weights
    return _matmul(weights, env["V"])


def key_settings(data: dict) -> dict:
    return dict(data["answer"])


def mistake_settings(data: dict, mistake: dict) -> dict:
    return {**key_settings(data), **mistake["compute"]}


def result(data: dict, env: dict) -> list[list[float]]:
    return compute(key_settings(data), env)


def asked(data: dict, env: dict, matrix: list[list[float]]):
    """What the student gives: the matrix, or the entry at (row, col) counted from 1."""
    if data.get("ask", "matrix") == "entry":
        return matrix[env["row"] - 1][env["col"] - 1]
    return matrix


def close(a, b, tol: float) -> bool:
    """Whether two answers (numbers or matrices of the same shape) agree within ``tol`` everywhere."""
    if isinstance(a, list):
        return len(a) == len(b) and all(close(x, y, tol) for x, y in zip(a, b))
    return abs(a - b) <= tol + 1e-12


def tolerance(data: dict) -> float:
    return float(data.get("tolerance", {}).get("abs", 0.005))


# -- variants ------------------------------------------------------------------------------

def draw(data: dict, envs: list[dict]) -> list[dict]:
    """``draws`` variants for each parameter assignment: random matrices (fixed by the question's
    id, so every process deals the same ones) on which the key and each mistake differ."""
    wanted = int(data.get("draws", DEFAULT_DRAWS))
    out = []
    for n, base in enumerate(envs):
        rng = random.Random(f"attn-grader:{data['id']}:{n}")
        kept, seen = 0, set()
        for _ in range(50 * wanted):
            env = dict(base)
            for name, spec in data["matrices"].items():
                rows, cols = spec["shape"]
                env[name] = tuple(tuple(rng.choice(spec["values"]) for _ in range(cols)) for _ in range(rows))
            shape = _result_shape(data, env)
            if data.get("ask", "matrix") == "entry":
                env["row"], env["col"] = _entry(data, shape, rng)
            fingerprint = tuple(sorted((k, v) for k, v in env.items() if k in data["matrices"] or k in ("row", "col")))
            if fingerprint in seen or degenerate(env) or not distinct(data, env):
                continue
            seen.add(fingerprint)
            out.append(env)
            kept += 1
            if kept == wanted:
                break
    return out


def _entry(data: dict, shape: tuple[int, int], rng: random.Random) -> tuple[int, int]:
    """The asked entry, counted from 1. Under a mask, never a hidden weight (always 0) nor the
    first row (it sees one key: weight 1, output = the first value)."""
    if data["answer"].get("mask", "none") == "none" or shape[0] < 2:
        return rng.randrange(shape[0]) + 1, rng.randrange(shape[1]) + 1
    row = rng.randrange(1, shape[0]) + 1
    cols = row if data["answer"].get("result", "output") != "output" else shape[1]
    return row, rng.randrange(cols) + 1


def _result_shape(data: dict, env: dict) -> tuple[int, int]:
    rows = len(env["Q"])
    cols = len(env["K"]) if data["answer"].get("result", "output") != "output" else len(env["V"][0])
    return rows, cols


def degenerate(env: dict) -> bool:
    """Two equal queries (the same row asked twice) or a constant column of V (that output column
    is the same whatever the weights, so it tests nothing)."""
    q, v = env.get("Q"), env.get("V")
    return (q is not None and len(set(q)) < len(q)) or (v is not None and len(v) > 1 and
                                                        any(len(set(col)) == 1 for col in zip(*v)))


def distinct(data: dict, env: dict) -> bool:
    """The key and every listed mistake give different answers (beyond twice the tolerance)."""
    answers = [asked(data, env, result(data, env))]
    answers += [asked(data, env, compute(mistake_settings(data, m), env)) for m in data.get("mistakes") or []]
    tol = 2 * tolerance(data)
    return all(not close(a, b, tol) for i, a in enumerate(answers) for b in answers[i + 1:])


# -- structure -------------------------------------------------------------------------------

def text_names(data: dict) -> set[str]:
    """The placeholders a matrix question's texts may use besides its parameters."""
    names = {n for n in data.get("matrices") or {} if n in ("Q", "K", "V")}
    return names | ({"row", "col"} if data.get("ask") == "entry" else set())


def check_structure(p, data: dict, names: set[str]) -> None:
    """Problems of the matrix-specific fields (``names``: what the texts may use)."""
    from .schema import _formula, _texts
    matrices = data.get("matrices")
    if not isinstance(matrices, dict) or not {"Q", "K"} <= set(matrices):
        p.add("matrices", "must name at least the matrices Q and K (and V for an output)")
        return
    for name, spec in matrices.items():
        field = f"matrices.{name}"
        if name not in ("Q", "K", "V"):
            p.add(field, "the matrices are Q, K and V")
            continue
        if not isinstance(spec, dict) or set(spec) != {"shape", "values"}:
            p.add(field, "must be {shape: [rows, cols], values: [integers to draw from]}")
            continue
        shape, values = spec["shape"], spec["values"]
        if not (isinstance(shape, list) and len(shape) == 2 and all(
                isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= MAX_SIDE for n in shape)):
            p.add(field + ".shape", f"must be [rows, cols], each 1 to {MAX_SIDE}: a hand computation")
        if not (isinstance(values, list) and len(values) >= 2 and all(
                isinstance(v, int) and not isinstance(v, bool) and abs(v) <= 9 for v in values)):
            p.add(field + ".values", "must list at least two small integers (-9..9)")
    shapes = {n: s.get("shape") for n, s in matrices.items() if isinstance(s, dict)}
    answer = data.get("answer")
    if not isinstance(answer, dict) or "result" not in answer:
        p.add("answer", "must be {result: scores|weights|output, scale: formula, axis, mask}")
        return
    _settings(p, "answer", answer, names, _formula)
    if answer.get("result") == "output" and "V" not in shapes:
        p.add("matrices", "an output needs the values V")
    try:
        (q_rows, q_cols), (k_rows, k_cols) = shapes["Q"], shapes["K"]
        if q_cols != k_cols:
            p.add("matrices.K.shape", "K needs as many columns as Q (the dimension d_k)")
        if "V" in shapes and shapes["V"][0] != k_rows:
            p.add("matrices.V.shape", "V needs one row per key (as many rows as K)")
        if answer.get("mask", "none") != "none" and q_rows > k_rows:
            p.add("answer.mask", "a causal mask here needs at least as many keys as queries")
    except (TypeError, ValueError, KeyError):
        pass
    ask = data.get("ask", "matrix")
    if ask not in ("matrix", "entry"):
        p.add("ask", "must be matrix (the whole result) or entry (one entry drawn per variant)")
    draws = data.get("draws", DEFAULT_DRAWS)
    if isinstance(draws, bool) or not isinstance(draws, int) or not 1 <= draws <= MAX_DRAWS:
        p.add("draws", f"must be the number of drawn variants, 1 to {MAX_DRAWS}")
    tol = data.get("tolerance", {"abs": 0.005})
    if not isinstance(tol, dict) or set(tol) != {"abs"} or isinstance(tol["abs"], bool) or \
            not isinstance(tol["abs"], (int, float)) or tol["abs"] <= 0:
        p.add("tolerance", "must be {abs: number}: the allowed error of each entry")
    for i, m in enumerate(data.get("mistakes") or []):
        if not isinstance(m, dict) or not isinstance(m.get("compute"), dict) or not m["compute"]:
            p.add(f"mistakes[{i}]", "must be {compute: {setting: value}, feedback: {en, ru, zh}}")
            continue
        _settings(p, f"mistakes[{i}].compute", m["compute"], names, _formula)
        if m["compute"].get("result", answer.get("result")) != answer.get("result"):
            p.add(f"mistakes[{i}].compute.result", "a mistake must give a matrix of the key's shape")
        _texts(p, f"mistakes[{i}].feedback", m.get("feedback"), names)


def _settings(p, field: str, settings: dict, names: set[str], formula) -> None:
    for key in set(settings) - SETTINGS:
        p.add(f"{field}.{key}", f"unknown setting; use {', '.join(sorted(SETTINGS))}")
    if "result" in settings and settings["result"] not in RESULTS:
        p.add(f"{field}.result", f"must be one of {', '.join(RESULTS)}")
    if "axis" in settings and settings["axis"] not in AXES:
        p.add(f"{field}.axis", f"must be one of {', '.join(AXES)}")
    if "mask" in settings and settings["mask"] not in MASKS:
        p.add(f"{field}.mask", f"must be one of {', '.join(MASKS)}")
    if "scale" in settings:
        formula(p, f"{field}.scale", settings["scale"], names - {"Q", "K", "V", "row", "col"})
