"""What a student sees of a question once it is final: their answer beside the key.

``review(question, seed, answer, ...)`` lays one variant out for the reader's language: the
options with the student's pick and the right one(s) marked, each picked or right option with
its feedback (why it is wrong, why it is right); the student's order or pairs beside the key's;
their number, matrix, shape or expression beside the right one; the model solution of a code
question, the model answer of a free-text one; and the worked solution (``explanation``).

A choice question without an ``explanation`` explains itself through its right option's
feedback, a code question through its model solution: every question shows a solution once final.

The caller decides *when* (``web.services.quiz_policy``: only once the question is final, never
while tries remain, since all of this names the answer). ``answer`` None is an unanswered
question of a submitted attempt: the key alone. Pure functions of the bank: no database, no torch.
"""
from __future__ import annotations

import math

from grader.i18n import render

from . import bigo, handcalc, shapes, symbolic
from .answers import AnswerFormatError, grade_answer, numeric_answer, parse_number
from .messages import bank_text
from .model import Question
from .variants import _ordered, format_number, params_for, shown_options, substitute, token


def review(question: Question, seed: int, answer=None, *, answered_in: str = "en",
           lang: str = "en", every_feedback: bool = False) -> dict:
    """The final view of one answer; see the module docstring. ``answered_in``: the language the
    answer was written in (how its numbers are read); ``lang``: the reader's; ``every_feedback``:
    every option's feedback, not only the picked and right ones' (the instructor's preview)."""
    env = params_for(question, seed)
    d, kind = question.data, question.kind
    explanation = d.get("explanation")
    out = {"kind": kind, "answered": answer is not None, "head": None,
           "explanation": render(bank_text(explanation, env), lang) if explanation else None}
    graded = None
    if answer is not None and kind not in ("code", "free_text"):
        try:  # pure and cheap for these kinds; the stored points stay the record
            graded = grade_answer(question, seed, answer, answered_in)
        except AnswerFormatError:  # an answer the bank no longer reads (the question changed)
            answer, out["answered"] = None, False
    if graded is not None:
        out["head"] = render(graded.head if graded.head is not None else graded.feedback, lang)
        out["correct"] = graded.correct

    def text(texts: dict) -> str:
        return substitute(texts.get(lang, texts["en"]), env, lang)

    if kind in ("single", "multiple"):
        chosen = _resolved(question, seed, answer if isinstance(answer, list) else [answer], "")
        out["options"] = [{"text": text(o["text"]), "chosen": o["id"] in chosen, "correct": o["correct"],
                           "feedback": text(o["feedback"]) if every_feedback or o["id"] in chosen or o["correct"]
                           else None}
                          for o in shown_options(question, seed)]
    elif kind == "ordering":
        items = {i["id"]: text(i["text"]) for i in d["items"]}
        key = [i["id"] for i in d["items"]]
        order = _resolved(question, seed, answer or [], "")
        out["order"] = [{"text": items[i], "in_place": n < len(key) and key[n] == i} for n, i in enumerate(order)]
        out["key_order"] = [items[i] for i in key]
    elif kind == "matching":
        rights = {p["id"]: text(p["right"]) for p in d["pairs"]}
        distractors = {x["id"]: x for x in d.get("distractors") or []}
        rights.update({x["id"]: text(x["text"]) for x in distractors.values()})
        chosen = {}
        for left, right in (answer or {}).items():
            lid, rid = _resolved(question, seed, [left], "l:"), _resolved(question, seed, [right], "r:")
            if lid and rid:
                chosen[lid[0]] = rid[0]
        out["pairs"] = [{"left": text(p["left"]), "key": rights[p["id"]],
                         "chosen": rights.get(chosen.get(p["id"])), "right": chosen.get(p["id"]) == p["id"],
                         "feedback": text(distractors[chosen[p["id"]]]["feedback"])
                         if chosen.get(p["id"]) in distractors and distractors[chosen[p["id"]]].get("feedback")
                         else None}
                        for p in _ordered(question, d["pairs"], seed, "left")]
    elif kind == "numeric":
        out["key"] = format_number(numeric_answer(question, env), lang)
        out["unit"] = d["unit"][lang] if d.get("unit") else None
        out["yours"] = _number(answer, answered_in, lang)
    elif kind == "matrix":
        key = handcalc.result(d, env)
        # the key to the precision the question asks ("two decimals": tolerance 0.01), not 0.6626
        places = max(0, math.ceil(-math.log10(handcalc.tolerance(d)) - 1e-9))
        if d.get("ask", "matrix") == "entry":
            out["key"] = format_number(round(handcalc.asked(d, env, key), places), lang)
            out["yours"] = _number(answer, answered_in, lang)
        else:
            tol = handcalc.tolerance(d)
            out["key_grid"] = [[format_number(round(x, places), lang) for x in row] for row in key]
            grid = (graded.details.get("matrix") if graded else None) or []
            out["grid"] = [[{"value": format_number(x, lang), "right": abs(x - k) <= tol + 1e-12}
                            for x, k in zip(row, key_row)] for row, key_row in zip(grid, key)]
    elif kind == "shape":
        out["key"] = shapes.shape_text(shapes.shape_value(d["answer"], env))
        out["yours"] = shapes.shape_text(tuple(graded.details["shape"])) if graded else None
    elif kind == "big_o":
        out["key"] = "O(" + bigo.text_of(bigo.canonical(d["answer"], d["variables"])) + ")"
        out["yours"] = answer if graded else None  # as typed: O(d n²), not the parser's O(d n^2)
    elif kind == "expression":
        out["key"] = symbolic.pretty(d["answer"])
        out["yours"] = answer if graded else None
    elif kind == "code":
        out["yours"] = answer
        out["model_solution"] = d["model_solution"]
    elif kind == "free_text":
        out["yours"] = answer
        out["model_answer"] = text(d["model_answer"])
    return out


def _resolved(question: Question, seed: int, answers: list, prefix: str) -> list[str]:
    """The file's ids of the shown tokens (or ids) in ``answers``; unknown ones left out."""
    d = question.data
    if prefix == "l:":
        ids = [p["id"] for p in d["pairs"]]
    elif prefix == "r:":
        ids = [p["id"] for p in d["pairs"]] + [x["id"] for x in d.get("distractors") or []]
    else:
        ids = [o["id"] for o in d.get("options") or d.get("items") or []]
    by_token = {token(seed, question.id, prefix + i): i for i in ids}
    return [by_token.get(a, a) for a in answers if isinstance(a, str) and (a in by_token or a in ids)]


def _number(answer, answered_in: str, lang: str) -> str | None:
    """The student's number as the reader writes numbers (0,125 in Russian)."""
    if answer is None:
        return None
    try:
        return format_number(parse_number(answer, answered_in), lang)
    except AnswerFormatError:
        return str(answer)
