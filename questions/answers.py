"""Grading a student's answer to one variant of a question.

Answer formats (what ``grade_answer`` takes):

* ``single``: one option id (the opaque id from :func:`render`, or the id in the file).
* ``multiple``: a list of option ids. Partial credit: ``max(0, right/R - wrong/W)`` of the
  points, where R and W count the correct and incorrect options (the Moodle convention);
  ``correct`` is true only for exactly the right set.
* ``numeric``: a number or a string: ``0.125``, ``0,125``, ``1/8``, ``1e-3``, ``1.5·10^-3``,
  ``12.5%`` (= 0.125), with spaces and a Unicode minus tolerated; ``1,024`` is 1024 in English
  and Chinese but 1.024 in Russian. Expressions such as ``sqrt(64)`` are refused.
* ``ordering``: the item ids in the student's order. Partial credit by relative order: the share
  of the n(n − 1)/2 pairs of items that are in the key's order relative to each other (Moodle's
  "relative to all previous and next"), so moving one item costs in proportion to how far it
  moved. A ``misplacements`` entry names a pair whose inversion is the misconception the question
  is about (the mask after the softmax): an order breaking it earns at most its ``credit`` and
  gets its feedback.
* ``matching``: ``{left id: right id}``; the share of pairs matched; a chosen distractor with
  ``feedback`` shows it.
* ``matrix``, ``shape``, ``big_o``, ``expression``: a list of rows of numbers (or one number for
  ``ask: entry``), a shape such as ``(2, 8, 10, 16)``, a growth such as ``O(n^2 d)``, a formula
  such as ``d_k*(1 + 2*mu^2)``; see :mod:`questions.typed`.
* ``code``: Python source, run in the sandbox and compared with a reference in this process.
* ``free_text``: any text; stored for the instructor, ``correct`` is None and points 0
  until :func:`score_rubric` records the instructor's verdict.

A malformed answer (wrong type, unknown id, unreadable number) raises
:class:`AnswerFormatError`, so the caller can ask again without counting an attempt.
"""
from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field
from fractions import Fraction

from grader.i18n import N_, T, counted, entry, joined

from . import expr
from .messages import CORRECT, INCORRECT, bank_text, number
from .model import Question
from .schema import LANGS
from .variants import params_for, shown_options, substitute, token


class AnswerFormatError(ValueError):
    """The answer cannot be read (as opposed to being wrong)."""


@dataclass
class AnswerResult:
    correct: bool | None          # None: waiting for an instructor
    points: float
    max_points: float
    feedback: str                 # English; a ``T`` carries its template for the reader's language
    details: dict = field(default_factory=dict)
    # the verdict without what a review shows beside it (option feedback, the explanation):
    # read by ``questions.review``, never stored (``to_dict`` leaves it out)
    head: str | None = None

    def to_dict(self) -> dict:
        """JSON-ready: ``feedback`` in English, ``feedback_i18n`` its template and arguments
        (``grader.i18n.entry``), rendered in each reader's language by ``grader.i18n.render``."""
        return {"correct": self.correct, "points": self.points, "max_points": self.max_points,
                "feedback": str(self.feedback), "feedback_i18n": entry(self.feedback),
                "details": self.details}


_NUM = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_SUPERSCRIPT = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")


def parse_number(answer, lang: str = "en") -> float:
    """Read a student's number; see the module docstring for the accepted forms.

    A comma is a decimal separator in Russian ("0,125"); in English and Chinese "1,024" groups
    thousands, and a lone comma elsewhere ("0,125") is still read as a decimal comma.
    """
    if isinstance(answer, bool) or answer is None:
        raise AnswerFormatError("expected a number")
    if isinstance(answer, (int, float)):
        if not math.isfinite(answer):
            raise AnswerFormatError("the number must be finite")
        return float(answer)
    if not isinstance(answer, str):
        raise AnswerFormatError(f"expected a number, got {type(answer).__name__}")
    text = re.sub(r"[\s\u00a0\u2009\u202f]+", "", expr.halfwidth(answer)).replace("−", "-").replace("–", "-")
    if not text or len(text) > 64:
        raise AnswerFormatError("expected a number such as 0.125, 1/8 or 1e-3")
    if lang != "ru" and re.fullmatch(r"[+-]?[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?", text):
        text = text.replace(",", "")  # thousands separators: 1,024 or 2,359,296
    if "," in text:
        if "." in text or text.count(",") > 1:
            raise AnswerFormatError(f"cannot read {answer!r}: use one decimal separator")
        text = text.replace(",", ".")  # a decimal comma, as written in Russian
    percent = text.endswith("%")
    text = text.rstrip("%") if percent else text
    power = re.fullmatch(rf"({_NUM})[x×·*]10(?:\^|\*\*)?([+-]?\d+|[⁻⁺]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+)", text)
    fraction = re.fullmatch(rf"({_NUM})/({_NUM})", text)
    if power:
        value = float(power.group(1)) * 10.0 ** int(power.group(2).translate(_SUPERSCRIPT))
    elif fraction:
        denominator = float(fraction.group(2))
        if denominator == 0:
            raise AnswerFormatError("division by zero")
        value = float(Fraction(fraction.group(1)) / Fraction(fraction.group(2)))
    elif re.fullmatch(_NUM, text):
        value = float(text)
    else:
        raise AnswerFormatError(f"cannot read {answer!r} as a number (try 0.125, 1/8 or 1e-3)")
    value = value / 100 if percent else value
    if not math.isfinite(value):
        raise AnswerFormatError("the number must be finite")
    return value


def within(value: float, target: float, tolerance: dict) -> bool:
    err = abs(value - target)
    limits = [tolerance["abs"]] if "abs" in tolerance else []
    if "rel" in tolerance:
        limits.append(tolerance["rel"] * abs(target))
    return any(err <= lim + 1e-12 * max(1.0, abs(target)) for lim in limits)


def numeric_answer(question: Question, env: dict) -> float:
    return float(expr.evaluate(question.data["answer"], env))


def _option_feedback(question: Question, oid: str, env: dict):
    opt = next(o for o in question.data["options"] if o["id"] == oid)
    return bank_text(opt["feedback"], env)


def grade_answer(question: Question, seed: int, answer, lang: str = "en", *,
                 sandbox: str = "auto", params: dict | None = None) -> AnswerResult:
    """Grade ``answer`` for the variant ``seed`` of ``question``.

    ``lang`` is the language the answer was written in (how a number is read: 0,125 in
    Russian); the feedback is a ``T`` rendered later in the reader's language, and the grade
    never depends on it. ``params`` overrides the variant's parameter values (used by validation).
    """
    if lang not in LANGS:
        raise ValueError(f"unknown language {lang!r}; use one of {', '.join(LANGS)}")
    env = params_for(question, seed) if params is None else params
    kind, d, top = question.kind, question.data, question.points
    explanation = bank_text(d["explanation"], env) if d.get("explanation") else ""

    def result(fraction: float, correct, feedback: T, head: T | None = None, **details) -> AnswerResult:
        short = feedback if head is None else head
        if explanation and correct is not None:
            feedback = joined([feedback, explanation], "\n\n")
        return AnswerResult(correct, round(top * fraction, 6), top, feedback, details, short)

    if kind in ("single", "multiple"):
        shown = shown_options(question, seed)  # an option this student was not shown is no answer
        ids = [o["id"] for o in shown]
    if kind == "single":
        oid = _resolve_prefixed(question, seed, answer, "", ids)
        ok = next(o for o in shown if o["id"] == oid)["correct"]
        head = T(CORRECT if ok else INCORRECT)
        return result(1.0 if ok else 0.0, ok, _verdict_and(head, _option_feedback(question, oid, env)), head)
    if kind == "multiple":
        if not isinstance(answer, (list, tuple, set)):
            raise AnswerFormatError("expected a list of option ids")
        chosen = {_resolve_prefixed(question, seed, a, "", ids) for a in answer}
        right = {o["id"] for o in shown if o["correct"]}
        wrong = set(ids) - right
        fraction = max(0.0, len(chosen & right) / len(right) - len(chosen & wrong) / len(wrong))
        ok = chosen == right
        lines = [T(CORRECT) if ok else T(INCORRECT) if fraction == 0 else
                 T("Partly correct: {got} of {total}.", got=len(chosen & right), total=len(right))]
        lines += [_option_feedback(question, oid, env) for oid in ids if oid in chosen]
        if right - chosen:
            lines.append(counted(len(right - chosen), N_("You left out {n} correct option."),
                                 N_("You left out {n} correct options."), n=len(right - chosen)))
        return result(fraction, ok, joined(lines, "\n"), lines[0])
    if kind == "numeric":
        value = parse_number(answer, lang)
        mistakes = [(float(expr.evaluate(m["value"], env)), m["feedback"]) for m in d.get("mistakes") or []]
        return _graded_number(value, numeric_answer(question, env), d.get("tolerance", {"rel": 1e-9}),
                              mistakes, env, result, top, explanation)
    if kind == "ordering":
        ids = [i["id"] for i in d["items"]]
        if not isinstance(answer, (list, tuple)) or len(answer) != len(ids):
            raise AnswerFormatError(f"expected a list of all {len(ids)} item ids in order")
        order = [_resolve_prefixed(question, seed, a, "", ids) for a in answer]
        if len(set(order)) != len(order):
            raise AnswerFormatError("each item must appear exactly once")
        # relative order (Kendall-style, Moodle's "relative to all previous and next"): a shift
        # of the whole sequence loses little, a swap of two far-apart items a lot
        place = {oid: n for n, oid in enumerate(order)}
        pairs = list(itertools.combinations(ids, 2))
        kept = sum(place[a] < place[b] for a, b in pairs)
        fraction, notes = kept / len(pairs), []
        for m in d.get("misplacements") or []:  # the misconception the question is about
            if place[m["first"]] > place[m["then"]]:
                fraction = min(fraction, float(m.get("credit", 0)))
                notes.append(bank_text(m["feedback"], env))
        ok = kept == len(pairs)
        head = T(CORRECT) if ok else T("{got} of {total} pairs of items are in the right order relative "
                                       "to each other.", got=kept, total=len(pairs))
        if notes and fraction < kept / len(pairs):  # say why the score is below the share of pairs
            head = T("{got} of {total} pairs of items are in the right order relative to each other, but "
                     "one pair is in the order this question warns about (see below), which caps the "
                     "score at {points} of {top}.", got=kept, total=len(pairs),
                     points=number(round(top * fraction, 2)), top=number(top))
        return result(fraction, ok, joined([head, *notes], "\n"), pairs=kept)
    if kind == "matching":
        lefts = [p["id"] for p in d["pairs"]]
        distractors = {x["id"]: x for x in d.get("distractors") or []}
        rights = lefts + list(distractors)
        if not isinstance(answer, dict):
            raise AnswerFormatError("expected a mapping {left id: right id}")
        chosen = {}
        for left, right in answer.items():
            lid = _resolve_prefixed(question, seed, left, "l:", lefts)
            chosen[lid] = _resolve_prefixed(question, seed, right, "r:", rights)
        got = sum(chosen.get(lid) == lid for lid in lefts)
        ok = got == len(lefts)
        notes = [bank_text(distractors[r]["feedback"], env) for r in dict.fromkeys(chosen.values())
                 if r in distractors and distractors[r].get("feedback")]
        head = T(CORRECT) if ok else T("{got} of {total} pairs are matched correctly.", got=got, total=len(lefts))
        return result(got / len(lefts), ok, joined([head, *notes], "\n"), head)
    if kind in ("matrix", "shape", "big_o", "expression"):
        from .typed import grade_typed
        return grade_typed(question, env, answer, lang, result, top, explanation)
    if kind == "code":
        from .codecheck import grade_code
        if not isinstance(answer, str):
            raise AnswerFormatError("expected Python source code as a string")
        fraction, ok, feedback, details = grade_code(question, seed, answer, sandbox=sandbox)
        # the test calls' verdict without the explanation: what a quiz that still allows tries
        # may show (which call failed and why names no part of the solution)
        return result(fraction, ok, feedback, **details, verdict=entry(feedback))
    if kind == "free_text":
        if not isinstance(answer, str) or not answer.strip():
            raise AnswerFormatError("expected a non-empty text")
        saved = T("Your answer is saved; an instructor will grade it against the rubric.")
        return AnswerResult(None, 0.0, top, saved,
                            {"status": "pending", "rubric": [r["id"] for r in d["rubric"]]})
    raise AnswerFormatError(f"cannot grade a {kind} question")


def _graded_number(value: float, target: float, tol: dict, mistakes: list, env: dict, result, top: float,
                   explanation) -> AnswerResult:
    """A number against its key and the known mistakes ((value, feedback texts) pairs)."""
    if within(value, target, tol):
        return result(1.0, True, T(CORRECT), value=value)
    for wrong, feedback in mistakes:
        if within(value, wrong, tol):
            return result(0.0, False, _verdict_and(T(INCORRECT), bank_text(feedback, env)), value=value)
    # no known mistake: say which way it is off; the explanation states the answer, so it goes
    # in ``details`` for the service to show once the question is final (quiz_policy.py)
    hint = T("Your value {value} is too large.", value=number(value)) if value > target else \
        T("Your value {value} is too small.", value=number(value))
    return AnswerResult(False, 0.0, top, hint, {"value": value, "explanation": entry(explanation)})


def _verdict_and(verdict: T, feedback) -> T:
    # a template of its own: Chinese runs the two sentences together, without a space
    return T("{verdict} {feedback}", verdict=verdict, feedback=feedback)


def _resolve_prefixed(question: Question, seed: int, answer, prefix: str, ids: list[str]) -> str:
    if not isinstance(answer, str):
        raise AnswerFormatError(f"expected an id (string), got {type(answer).__name__}")
    for oid in ids:
        if answer in (oid, token(seed, question.id, prefix + oid)):
            return oid
    raise AnswerFormatError(f"{answer!r} is not one of this question's ids")


def score_rubric(question: Question, awarded: list[str]) -> AnswerResult:
    """The instructor's verdict on a free-text answer: the rubric points they ticked."""
    if question.kind != "free_text":
        raise ValueError(f"{question.id} is not a free-text question")
    points = {r["id"]: float(r["points"]) for r in question.data["rubric"]}
    unknown = set(awarded) - set(points)
    if unknown:
        raise AnswerFormatError(f"unknown rubric point(s): {', '.join(sorted(unknown))}")
    got = sum(points[r] for r in set(awarded))
    return AnswerResult(got >= question.points - 1e-9, got, question.points,
                        T("Graded by the instructor: {got} of {total} points.", got=number(got),
                          total=number(question.points)),
                        {"status": "graded", "awarded": sorted(set(awarded))})


def solution(question: Question, seed: int, lang: str = "en", *, params: dict | None = None) -> dict:
    """The right answer of a variant, for instructors and exports (never for a live quiz)."""
    env = params_for(question, seed) if params is None else params
    d = question.data
    if question.kind in ("single", "multiple"):
        right = [o["id"] for o in shown_options(question, seed) if o["correct"]]
        return {"options": right, "tokens": [token(seed, question.id, oid) for oid in right]}
    if question.kind == "numeric":
        return {"value": numeric_answer(question, env), "tolerance": d.get("tolerance", {"rel": 1e-9})}
    if question.kind == "ordering":
        return {"order": [i["id"] for i in d["items"]]}
    if question.kind == "matching":
        return {"pairs": {p["id"]: p["id"] for p in d["pairs"]}}
    if question.kind == "code":
        return {"model_solution": d["model_solution"]}
    if question.kind in ("matrix", "shape", "big_o", "expression"):
        from .typed import solution_of
        return solution_of(question, env)
    return {"model_answer": substitute(d["model_answer"][lang], env, lang),
            "rubric": [{"id": r["id"], "points": r["points"], "text": substitute(r["text"][lang], env, lang)}
                       for r in d["rubric"]]}
