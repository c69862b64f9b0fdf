"""Structural checks of one question file: fields, types, languages, formulas.

Each problem is reported as ``"<file>: <field.path>: <what is wrong>"`` so that an author
can jump straight to it. The deeper checks that need variants and grading (every variant
has a valid answer, the right answer is accepted...) live in :mod:`questions.check`.
"""
from __future__ import annotations

import re

from . import expr

LANGS = ("en", "ru", "zh")
KINDS = ("single", "multiple", "numeric", "ordering", "matching", "code", "free_text", "matrix", "shape",
         "big_o", "expression")
DIFFICULTIES = ("easy", "medium", "hard")
DIFFICULTY_ALIASES = {1: "easy", 2: "medium", 3: "hard"}

# The chapter's topics; every question is tagged with at least one.
TOPICS = {
    "formula": "the scaled dot-product attention formula and its shapes",
    "qkv-lookup": "queries, keys and values as a soft lookup table",
    "scaling": "why the scores are divided by sqrt(d_k)",
    "variance": "the variance of q·k under the initialisation assumptions",
    "scale-factor": "what a larger or smaller scale factor does",
    "softmax-saturation": "softmax saturation and vanishing gradients",
    "sqrt-vs-dk": "why sqrt(d_k) and not d_k",
    "temperature": "learnable temperature and QK-normalisation",
    "multi-head": "multi-head attention, d_k = d_model / h",
    "self-attention": "self-attention in the encoder",
    "masked-attention": "masked (causal) self-attention in the decoder",
    "cross-attention": "cross-attention from decoder to encoder",
    "permutation": "permutation invariance and positional information",
    "parallelism": "parallel computation versus recurrence",
    "encoder-decoder": "the encoder and decoder stacks",
    "autoregressive": "autoregressive factorisation and generation",
    "numerical-stability": "the stable softmax, overflow, -inf masks and fully masked rows",
    "encoder-layer": "the encoder layer: position-wise feed-forward network, residuals, LayerNorm",
    "cost": "compute and memory of the score matrix",
    "saturation-measures": "the entropy and the largest weight of a row of attention weights",
    "heads-learn": "what different heads learn, and what their weights do and do not show",
    "kv-cache": "the key/value cache of autoregressive decoding: what is cached, its size, its cost",
    "history": "the RNN bottleneck and the Bahdanau/Luong attention that came before the Transformer",
}

ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]{2,63}$")
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # B, T, d_k: the names the chapter uses
OPTION_ID_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
PLACEHOLDER_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
# A space between two Chinese characters (or after Chinese punctuation) is a YAML line fold
# that Chinese text must not have: write such text on one line or fold at a Latin word.
_CJK = "\u3000-\u303f\u4e00-\u9fff\uff00-\uffef"
CJK_GAP_RE = re.compile(f"[{_CJK}] (?=[{_CJK}])|[\u3001\u3002\uff0c\uff1a\uff1b\uff08\uff09] (?!\\|)")  # "） |": a table cell
MAX_VARIANTS = 5000

COMMON = {"id", "kind", "title", "topics", "difficulty", "points", "prompt", "params", "derived",
          "constraints", "explanation", "shuffle", "source"}
BY_KIND = {
    "single": {"options", "show"}, "multiple": {"options", "show"},
    "numeric": {"answer", "tolerance", "mistakes", "unit"},
    "ordering": {"items", "misplacements"}, "matching": {"pairs", "distractors"},
    "code": {"function", "template", "reference", "cases", "compare", "model_solution",
             "wrong_solutions"},
    "free_text": {"rubric", "model_answer"},
    "matrix": {"matrices", "answer", "ask", "draws", "tolerance", "mistakes"},
    "shape": {"answer", "mistakes"},
    "big_o": {"answer", "variables", "mistakes"},
    "expression": {"answer", "variables", "mistakes"},
}


class Problems:
    """Collects problems for one file, each prefixed with the file and the field."""

    def __init__(self, source: str):
        self.source, self.items = source, []

    def add(self, field: str, message: str) -> None:
        self.items.append(f"{self.source}: {field}: {message}")


def _texts(p: Problems, field: str, value, names: set[str] | None, required=True) -> None:
    """A text in every language, with placeholders that name known parameters."""
    if value is None and not required:
        return
    if not isinstance(value, dict):
        p.add(field, f"must be a mapping with one text per language ({', '.join(LANGS)})")
        return
    for lang in LANGS:
        text = value.get(lang)
        if not isinstance(text, str) or not text.strip():
            p.add(f"{field}.{lang}", "missing or empty text")
        else:
            gap = CJK_GAP_RE.search(text) if lang == "zh" else None
            if gap:
                p.add(f"{field}.{lang}", f"stray space in Chinese text near {text[max(0, gap.start() - 6):gap.end() + 6]!r} "
                      "(a folded line break? keep Chinese sentences on one line)")
        if isinstance(text, str) and names is not None:
            for name in PLACEHOLDER_RE.findall(text):
                if name not in names:
                    p.add(f"{field}.{lang}", f"placeholder {{{name}}} names no parameter")
    for extra in set(value) - set(LANGS):
        p.add(f"{field}.{extra}", f"unknown language; use {', '.join(LANGS)}")
    if names is not None and all(isinstance(value.get(l), str) for l in LANGS):
        used = [set(PLACEHOLDER_RE.findall(value[l])) & names for l in LANGS]
        if any(u != used[0] for u in used):
            p.add(field, "the languages use different placeholders: " +
                  "; ".join(f"{l}: {sorted(u)}" for l, u in zip(LANGS, used)))


def _formula(p: Problems, field: str, source, names: set[str]) -> None:
    if isinstance(source, bool) or not isinstance(source, (str, int, float)):
        p.add(field, "must be a number or a formula")
        return
    try:
        unknown = expr.names(str(source)) - names
    except expr.ExprError as exc:
        p.add(field, str(exc))
        return
    if unknown:
        p.add(field, f"unknown name(s) {', '.join(sorted(unknown))}")


def _ids(p: Problems, field: str, entries: list, min_count: int) -> list[str]:
    if not isinstance(entries, list) or len(entries) < min_count:
        p.add(field, f"must be a list of at least {min_count} entries")
        return []
    ids = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            p.add(f"{field}[{i}]", "must be a mapping")
            continue
        oid = entry.get("id")
        if not isinstance(oid, str) or not OPTION_ID_RE.match(oid):
            p.add(f"{field}[{i}].id", "must be a short lower-case identifier")
        elif oid in ids:
            p.add(f"{field}[{i}].id", f"duplicate id {oid!r}")
        ids.append(oid)
    return ids


def check_structure(data, source: str, expected_id: str | None = None) -> list[str]:
    """Return the structural problems of one parsed question file (empty when valid)."""
    p = Problems(source)
    if not isinstance(data, dict):
        p.add("(top level)", "the file must contain one mapping (a question)")
        return p.items
    qid, kind = data.get("id"), data.get("kind")
    if not isinstance(qid, str) or not ID_RE.match(qid):
        p.add("id", "must be 3-64 characters of a-z, 0-9 and '-'")
    elif expected_id is not None and qid != expected_id:
        p.add("id", f"{qid!r} does not match the file name {expected_id!r}")
    if kind not in KINDS:
        p.add("kind", f"must be one of {', '.join(KINDS)}, got {kind!r}")
        return p.items
    for extra in sorted(set(data) - COMMON - BY_KIND[kind]):
        p.add(extra, f"unknown field for a {kind} question")
    topics = data.get("topics")
    if not isinstance(topics, list) or not topics:
        p.add("topics", "must be a non-empty list")
    else:
        for t in topics:
            if t not in TOPICS:
                p.add("topics", f"unknown topic {t!r}; known: {', '.join(TOPICS)}")
    diff = data.get("difficulty")
    if diff not in DIFFICULTIES and diff not in DIFFICULTY_ALIASES:
        p.add("difficulty", f"must be one of {', '.join(DIFFICULTIES)} (or 1-3), got {diff!r}")
    points = data.get("points", 1)
    if isinstance(points, bool) or not isinstance(points, (int, float)) or points <= 0:
        p.add("points", "must be a positive number")

    names = _check_params(p, data)
    if kind == "matrix":
        from .handcalc import text_names
        names |= text_names(data)
    _texts(p, "title", data.get("title"), None)
    _texts(p, "prompt", data.get("prompt"), names)
    _texts(p, "explanation", data.get("explanation"), names, required=False)
    if "source" in data and (not isinstance(data["source"], str) or not data["source"].strip()):
        p.add("source", "must say where the question comes from, e.g. 'chapter 2.1, self-check 3'")
    if "shuffle" in data and not isinstance(data["shuffle"], bool):
        p.add("shuffle", "must be true or false")
    CHECKERS[kind](p, data, names)
    return p.items


def _check_params(p: Problems, data: dict) -> set[str]:
    names: set[str] = set()
    params = data.get("params") or {}
    if not isinstance(params, dict):
        p.add("params", "must map parameter names to a list of values or a {range: [lo, hi], step: s}")
        params = {}
    for name, spec in params.items():
        field = f"params.{name}"
        if not isinstance(name, str) or not NAME_RE.match(name) or name in expr.FUNCTIONS:
            p.add(field, "parameter names are identifiers that are not function names")
            continue
        names.add(name)
        if isinstance(spec, list):
            if not spec or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in spec):
                p.add(field, "must be a non-empty list of numbers")
            elif len(set(spec)) != len(spec):
                p.add(field, "values repeat")
        elif isinstance(spec, dict) and set(spec) <= {"range", "step"} and "range" in spec:
            rng, step = spec["range"], spec.get("step", 1)
            if (not isinstance(rng, list) or len(rng) != 2
                    or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in rng)
                    or rng[0] > rng[1]):
                p.add(field + ".range", "must be [low, high] with low <= high")
            elif not isinstance(step, (int, float)) or step <= 0:
                p.add(field + ".step", "must be a positive number")
        else:
            p.add(field, "must be a list of values or {range: [low, high], step: s}")
    derived = data.get("derived") or {}
    if not isinstance(derived, dict):
        p.add("derived", "must map names to formulas")
        derived = {}
    for name, formula in derived.items():
        if not isinstance(name, str) or not NAME_RE.match(name) or name in names:
            p.add(f"derived.{name}", "must be a new identifier")
            continue
        _formula(p, f"derived.{name}", formula, names)  # may use parameters and earlier derived names
        names.add(name)
    constraints = data.get("constraints") or []
    if not isinstance(constraints, list):
        p.add("constraints", "must be a list of formulas")
    else:
        for i, c in enumerate(constraints):
            _formula(p, f"constraints[{i}]", c, names)
    return names


def _check_choice(p: Problems, data: dict, names: set[str]) -> None:
    options = data.get("options")
    _ids(p, "options", options, 2)
    if not isinstance(options, list):
        return
    correct = 0
    for i, opt in enumerate(o for o in options if isinstance(o, dict)):
        _texts(p, f"options[{i}].text", opt.get("text"), names)
        _texts(p, f"options[{i}].feedback", opt.get("feedback"), names)
        if not isinstance(opt.get("correct"), bool):
            p.add(f"options[{i}].correct", "must be true or false")
        correct += opt.get("correct") is True
    show = data.get("show")
    if len(options) > (16 if show else 10):
        p.add("options", "at most 10 options shown (LMS scoring fractions need it), 16 in a pool")
    if data.get("shuffle") is False:
        p.add("shuffle", "choice options are always shuffled, so that the key's position says nothing")
    wrong = len(options) - correct
    if show is not None:
        _check_show(p, data["kind"], show, correct, wrong)
    elif data["kind"] == "single" and correct != 1:
        p.add("options", f"a single-choice question needs exactly one correct option, has {correct}")
    if data["kind"] == "multiple" and (correct < 1 or wrong < 1):
        p.add("options", "a multiple-choice question needs at least one correct and one wrong option")


def _check_show(p: Problems, kind: str, show, correct: int, wrong: int) -> None:
    """``show: n`` draws n options per variant from the pool (see variants.shown_options)."""
    if isinstance(show, bool) or not isinstance(show, int) or not 2 <= show <= 10:
        p.add("show", "must be the number of options shown, 2 to 10")
    elif show >= correct + wrong:
        p.add("show", f"the pool has only {correct + wrong} options; leave 'show' out to show them all")
    elif correct < 1:
        p.add("options", "the pool needs at least one correct option")
    elif kind == "single" and wrong < show - 1:
        p.add("show", f"needs {show - 1} wrong options in the pool, has {wrong}")
    elif kind == "multiple" and max(1, show - wrong) > min(show - 1, correct):
        p.add("show", f"cannot draw {show} options with at least one right and one wrong from "
              f"{correct} right and {wrong} wrong ones")


def _check_numeric(p: Problems, data: dict, names: set[str]) -> None:
    if "answer" not in data:
        p.add("answer", "a numeric question needs an answer formula")
    else:
        _formula(p, "answer", data["answer"], names)
    tol = data.get("tolerance", {"rel": 1e-9})
    if not isinstance(tol, dict) or not tol or set(tol) - {"abs", "rel"} or any(
            isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 for v in tol.values()):
        p.add("tolerance", "must be {abs: number} and/or {rel: number}, non-negative")
    for i, m in enumerate(data.get("mistakes") or []):
        if not isinstance(m, dict) or "value" not in m:
            p.add(f"mistakes[{i}]", "must be {value: formula, feedback: {en, ru, zh}}")
            continue
        _formula(p, f"mistakes[{i}].value", m["value"], names)
        _texts(p, f"mistakes[{i}].feedback", m.get("feedback"), names)
    _texts(p, "unit", data.get("unit"), None, required=False)


def _check_ordering(p: Problems, data: dict, names: set[str]) -> None:
    items = data.get("items")
    ids = _ids(p, "items", items, 3)
    for i, item in enumerate(items if isinstance(items, list) else []):
        if isinstance(item, dict):
            _texts(p, f"items[{i}].text", item.get("text"), names)
    # the misplacements that are the point of the question: named, capped and explained
    for i, m in enumerate(data.get("misplacements") or []):
        field = f"misplacements[{i}]"
        if not isinstance(m, dict) or set(m) - {"first", "then", "credit", "feedback"}:
            p.add(field, "must be {first: item id, then: item id, credit: 0..1, feedback: {en, ru, zh}}")
            continue
        first, then = m.get("first"), m.get("then")
        if first not in ids or then not in ids or ids.index(first) >= ids.index(then):
            p.add(field, "first and then must be item ids, first before then in the key's order")
        credit = m.get("credit", 0)
        if isinstance(credit, bool) or not isinstance(credit, (int, float)) or not 0 <= credit < 1:
            p.add(f"{field}.credit", "must be the most credit (0 to below 1) an order breaking it earns")
        _texts(p, f"{field}.feedback", m.get("feedback"), names)


def _check_matching(p: Problems, data: dict, names: set[str]) -> None:
    pairs = data.get("pairs")
    ids = _ids(p, "pairs", pairs, 3)  # GIFT and Moodle want at least three pairs
    for i, pair in enumerate(pairs if isinstance(pairs, list) else []):
        if isinstance(pair, dict):
            _texts(p, f"pairs[{i}].left", pair.get("left"), names)
            _texts(p, f"pairs[{i}].right", pair.get("right"), names)
    distractors = data.get("distractors") or []
    for j, did in enumerate(_ids(p, "distractors", distractors, 0)):
        if did in ids:
            p.add(f"distractors[{j}].id", f"{did!r} is also a pair id")
        if isinstance(distractors[j], dict):
            _texts(p, f"distractors[{j}].text", distractors[j].get("text"), names)
            # what choosing this distractor shows the student (optional)
            _texts(p, f"distractors[{j}].feedback", distractors[j].get("feedback"), names, required=False)


def _check_code(p: Problems, data: dict, names: set[str]) -> None:
    from .cases import REFERENCE_NAMES, check_case
    if data.get("params"):
        p.add("params", "code questions are not parameterised; put sizes in cases")
    fn = data.get("function")
    if not isinstance(fn, str) or not NAME_RE.match(fn):
        p.add("function", "must be the name of the function the student writes")
    ref = data.get("reference")
    if ref not in REFERENCE_NAMES:
        p.add("reference", f"must name one of {', '.join(sorted(REFERENCE_NAMES))}")
    for field in ("template", "model_solution"):
        if not isinstance(data.get(field), str) or not data[field].strip():
            p.add(field, "must be Python source")
    wrong = data.get("wrong_solutions")
    if not isinstance(wrong, list) or not wrong or not all(isinstance(s, str) for s in wrong):
        p.add("wrong_solutions", "must list at least one wrong program that the grading must reject")
    cases = data.get("cases")
    if not isinstance(cases, list) or not cases:
        p.add("cases", "must be a non-empty list of {args: [...]} test calls")
    else:
        for i, case in enumerate(cases):
            try:
                check_case(case)
            except ValueError as exc:
                p.add(f"cases[{i}]", str(exc))
    compare = data.get("compare", {})
    if not isinstance(compare, dict) or set(compare) - {"atol", "rtol", "dtype"}:
        p.add("compare", "must be {atol, rtol, dtype}")


def _check_free_text(p: Problems, data: dict, names: set[str]) -> None:
    rubric = data.get("rubric")
    _ids(p, "rubric", rubric, 1)
    total = 0.0
    for i, point in enumerate(rubric if isinstance(rubric, list) else []):
        if not isinstance(point, dict):
            continue
        _texts(p, f"rubric[{i}].text", point.get("text"), names)
        pts = point.get("points")
        if isinstance(pts, bool) or not isinstance(pts, (int, float)) or pts <= 0:
            p.add(f"rubric[{i}].points", "must be a positive number")
        else:
            total += pts
    if isinstance(rubric, list) and rubric and abs(total - data.get("points", 1)) > 1e-9:
        p.add("points", f"must equal the rubric's total ({total:g})")
    _texts(p, "model_answer", data.get("model_answer"), names)


def _check_matrix(p: Problems, data: dict, names: set[str]) -> None:
    from .handcalc import check_structure
    check_structure(p, data, names)


def _check_shape(p: Problems, data: dict, names: set[str]) -> None:
    from .shapes import check_structure
    check_structure(p, data, names)


def _check_big_o(p: Problems, data: dict, names: set[str]) -> None:
    from .bigo import check_structure
    check_structure(p, data, names)


def _check_expression(p: Problems, data: dict, names: set[str]) -> None:
    from .symbolic import check_structure
    check_structure(p, data, names)


CHECKERS = {"single": _check_choice, "multiple": _check_choice, "numeric": _check_numeric,
            "ordering": _check_ordering, "matching": _check_matching, "code": _check_code,
            "free_text": _check_free_text, "matrix": _check_matrix, "shape": _check_shape,
            "big_o": _check_big_o, "expression": _check_expression}
