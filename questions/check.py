"""Deep validation of the bank: every variant, every language, right and wrong answers.

``validate_bank`` runs the structural checks of :mod:`questions.schema` (through the
loader) and then, for each question and each of its variants:

* renders it in every language and looks for unfilled placeholders and repeated options;
* computes the answer and checks it is a finite number (numeric questions);
* grades the right answer (must be accepted with full points) and wrong ones (must be
  rejected): every wrong option, a value well outside the tolerance, each listed common
  mistake, a reversed order, a shuffled matching;
* for code questions (unless ``run_code=False``), runs the model solution and each listed
  wrong solution in the sandbox: the first must pass and every other must fail;
* a question that speaks of positions by index (position i, x_(i+1), row i...) states the bank's
  one convention in its prompt, in every language: positions are numbered from 1 (and, where it
  predicts, the output at position i predicts x_(i+1)); nothing counts from 0.
"""
from __future__ import annotations

import math
import re

from . import schema
from .answers import AnswerFormatError, grade_answer, numeric_answer, within
from .cues import draw_seeds, length_problem, longest_option_problems, position_problems
from .model import Bank, Question, load_bank
from .originality import SeedIndex, find_seeds, overlap_problems
from .strategies import strategy_problems
from .variants import format_number, render, shown_options

SEED = 0  # the seed only orders options here; the parameter values come from each variant

# The bank's index convention (issue 29): positions are numbered from 1, and the output at
# position i predicts the next token x_(i+1). A question that uses indices says so in its prompt.
_INDEXED = {
    "en": re.compile(r"\b(?:position|row|column|token|output|query) [ijn]\b|x_\(?[ij]\b|\bj ≤ i\b"),
    "ru": re.compile(r"(?:позици|строк|столб|выход|токен)[а-яё]* [ij]\b|x_\(?[ij]\b|\bj ≤ i\b"),
    "zh": re.compile(r"位置 ?[ij](?![a-zA-Z])|第 ?[ij] ?[行列个]|x_\(?[ij]\b|\bj ≤ i\b"),
}
INDEX_CONVENTION = {"en": "numbered from 1", "ru": "нумеруются с 1", "zh": "从 1 开始编号"}
_FROM_ZERO = {"en": re.compile(r"(?:numbered|counted|indexed) from 0|0-based"),
              "ru": re.compile(r"(?:нумеруются|считаются|отсчитываются) с (?:0|нуля)"),
              "zh": re.compile(r"从 ?0 ?开始(?:编号|计数)")}


def index_problems(question: Question) -> list[str]:
    """Problems with the index convention (see ``INDEX_CONVENTION``)."""
    from .originality import _texts
    texts = list(_texts(question.data, ""))
    problems = [f"{question.path}: {field}.{lang}: counts positions from 0; the bank numbers them from 1"
                for field, lang, text in texts if _FROM_ZERO[lang].search(text)]
    if any(_INDEXED[lang].search(text) for _, lang, text in texts):
        for lang in schema.LANGS:
            if INDEX_CONVENTION[lang] not in question.data["prompt"][lang]:
                problems.append(f"{question.path}: prompt.{lang}: uses indices but does not state the "
                                f"convention ({INDEX_CONVENTION[lang]!r}, and that output i predicts x_(i+1) "
                                "where it predicts)")
    return problems


def check_question(question: Question, *, run_code: bool = True) -> list[str]:
    problems: list[str] = []

    def fail(field: str, message: str) -> None:
        problems.append(f"{question.path}: {field}: {message}")

    for env in question.variants():
        where = f" (variant {', '.join(f'{k}={format_number(v)}' for k, v in env.items())})" if env else ""
        try:
            _check_variant(question, env, fail, where)
        except (AnswerFormatError, ValueError, TypeError, ArithmeticError, KeyError) as exc:
            fail("(variant)", f"cannot be graded{where}: {exc}")
        if len(problems) > 20:
            problems.append(f"{question.path}: (variants): stopped after 20 problems")
            break
    if question.kind in ("single", "multiple"):
        cue = length_problem(question)
        if cue:
            fail("options", cue)
    if question.data.get("show"):
        _check_pool_coverage(question, fail)
    problems.extend(index_problems(question))
    if question.kind == "code" and run_code and not problems:
        _check_code(question, fail)
    return problems


def _check_variant(question: Question, env: dict, fail, where: str) -> None:
    d = question.data
    for lang in schema.LANGS:
        view = render(question, SEED, lang, params=env)
        texts = [view["prompt"]] + [o["text"] for o in view.get("options", []) + view.get("items", [])
                                    + view.get("left", []) + view.get("right", [])]
        for text in texts:
            leftover = [n for n in schema.PLACEHOLDER_RE.findall(text) if n in env]
            if leftover:
                fail(f"prompt.{lang}", f"placeholder {{{leftover[0]}}} left unfilled{where}")
        for key in ("options", "items", "left", "right"):
            shown = [o["text"].strip() for o in view.get(key, [])]
            if len(set(shown)) != len(shown):
                dup = next(t for t in shown if shown.count(t) > 1)
                fail(f"{key if key in d else 'pairs'}.{lang}", f"two entries read the same{where}: {dup!r}")

    def grade(answer, lang: str = "en"):
        return grade_answer(question, SEED, answer, lang, params=env)

    def must_accept(answer, field: str, lang: str = "en") -> None:
        r = grade(answer, lang)
        if r.correct is not True or abs(r.points - r.max_points) > 1e-9:
            fail(field, f"the right answer {answer!r} is not accepted{where}")

    def must_reject(answer, field: str) -> None:
        r = grade(answer)
        if r.correct is not False or r.points >= r.max_points:
            fail(field, f"the wrong answer {answer!r} is accepted{where}")

    kind = question.kind
    if kind in ("single", "multiple"):
        for seed in draw_seeds(question):  # every draw of a pool question must grade right
            _check_choice_draw(question, env, seed, fail, where)
    elif kind == "numeric":
        value = numeric_answer(question, env)
        if not math.isfinite(value):
            fail("answer", f"is not a finite number{where}")
            return
        tol = d.get("tolerance", {"rel": 1e-9})
        must_accept(repr(value), "answer")
        must_accept(format_number(value, "ru") if abs(value) >= 1e-4 else repr(value), "tolerance", "ru")
        slack = max(tol.get("abs", 0), tol.get("rel", 0) * abs(value))
        must_reject(repr(value + 10 * slack + 0.01 * max(1.0, abs(value))), "tolerance")
        from . import expr
        wrongs = [float(expr.evaluate(m["value"], env)) for m in d.get("mistakes") or []]
        for i, wrong in enumerate(wrongs):
            if within(wrong, value, tol):
                fail(f"mistakes[{i}].value", f"equals the right answer{where}")
            _distinct_mistakes(d, i, [j for j in range(i) if within(wrong, wrongs[j], tol)], fail, where)
    elif kind in ("matrix", "shape", "big_o", "expression"):
        _check_typed(question, env, grade, must_accept, must_reject, fail, where)
    elif kind == "ordering":
        ids = [i["id"] for i in d["items"]]
        must_accept(ids, "items")
        must_reject(ids[::-1], "items")
    elif kind == "matching":
        ids = [p["id"] for p in d["pairs"]]
        must_accept({i: i for i in ids}, "pairs")
        must_reject({a: b for a, b in zip(ids, ids[1:] + ids[:1])}, "pairs")
    elif kind == "free_text":
        r = grade("A student's answer.")
        if r.correct is not None or r.points != 0:
            fail("rubric", "a free-text answer must wait for the instructor")


def _distinct_mistakes(d: dict, i: int, same: list[int], fail, where: str) -> None:
    """Two listed mistakes with one value would show the first one's feedback for both slips."""
    mistakes = d["mistakes"]
    for j in same:
        if mistakes[j]["feedback"] != mistakes[i]["feedback"]:
            fail(f"mistakes[{i}].value", f"takes the value of mistakes[{j}]{where}, so a student who made "
                 "this slip would read the other's feedback; add a constraint or merge the two")


def _check_typed(question: Question, env: dict, grade, must_accept, must_reject, fail, where: str) -> None:
    """A matrix, shape, big-O or expression key is accepted, and every listed mistake is rejected with its own feedback."""
    from . import bigo, handcalc, shapes, symbolic
    d, kind = question.data, question.kind
    mistakes = d.get("mistakes") or []
    if kind == "matrix":
        key = handcalc.asked(d, env, handcalc.result(d, env))
        wrongs = [handcalc.asked(d, env, handcalc.compute(handcalc.mistake_settings(d, m), env)) for m in mistakes]
        if isinstance(key, list):
            must_accept(key, "answer")
            must_accept([[format_number(round(x, 6), "ru") for x in row] for row in key], "tolerance", "ru")
            must_reject([[x + 1 for x in row] for row in key], "tolerance")
        else:
            must_accept(repr(key), "answer")
            must_reject(repr(key + 1), "tolerance")
        answers = [w if isinstance(w, list) else repr(w) for w in wrongs]
    elif kind == "shape":
        key = shapes.shape_value(d["answer"], env)
        must_accept(shapes.shape_text(key), "answer")
        must_accept(f"torch.Size([{', '.join(map(str, key))}])", "answer")
        wrongs = [shapes.shape_value(m["value"], env) for m in mistakes]
        answers = [shapes.shape_text(w) for w in wrongs]
    elif kind == "expression":
        variables = d["variables"]
        key = symbolic.values(symbolic.parse(d["answer"], variables), variables)
        must_accept(d["answer"], "answer")
        for spelled in symbolic.spellings(d["answer"], variables):  # what the exports list
            must_accept(spelled, "answer")
        wrongs = [symbolic.values(symbolic.parse(m["value"], variables), variables) for m in mistakes]
        answers = [m["value"] for m in mistakes]
        for i, wrong in enumerate(wrongs):
            if symbolic.same(wrong, key):
                fail(f"mistakes[{i}].value", f"equals the right answer{where}")
            _distinct_mistakes(d, i, [j for j in range(i) if symbolic.same(wrongs[j], wrong)], fail, where)
            r = grade(answers[i])
            if r.correct is not False or str(mistakes[i]["feedback"]["en"]).split("{")[0][:30] not in r.feedback:
                fail(f"mistakes[{i}]", f"grading {answers[i]!r} does not give this mistake's feedback{where}")
        return
    else:
        variables = d["variables"]
        key = bigo.canonical(d["answer"], variables)
        must_accept(d["answer"], "answer")
        must_accept("O(" + bigo.text_of(key, "python", "*") + ")", "answer")
        wrongs = [bigo.canonical(m["value"], variables) for m in mistakes]
        answers = [m["value"] for m in mistakes]
    for i, (wrong, answer) in enumerate(zip(wrongs, answers)):
        if wrong == key:
            fail(f"mistakes[{i}].value", f"equals the right answer{where}")
            continue
        _distinct_mistakes(d, i, [j for j in range(i) if wrongs[j] == wrong], fail, where)
        r = grade(answer)
        if r.correct is not False or str(mistakes[i]["feedback"]["en"]).split("{")[0][:30] not in r.feedback:
            fail(f"mistakes[{i}]", f"grading {answer!r} does not give this mistake's feedback{where}")


def _check_choice_draw(question: Question, env: dict, seed: int, fail, where: str) -> None:
    shown = shown_options(question, seed)
    kind = question.kind
    right = [o["id"] for o in shown if o["correct"]]

    def grade(answer):
        return grade_answer(question, seed, answer, "en", params=env)

    r = grade(right[0] if kind == "single" else right)
    if r.correct is not True or abs(r.points - r.max_points) > 1e-9:
        fail("options", f"the right answer {right!r} is not accepted{where}, draw {seed}")
    wrong_answers = [o["id"] if kind == "single" else [o["id"]] for o in shown if not o["correct"]]
    if kind == "multiple":
        wrong_answers += [right[:-1]] if len(right) > 1 else []
        wrong_answers.append([o["id"] for o in shown])
    for answer in wrong_answers:
        r = grade(answer)
        if r.correct is not False or r.points >= r.max_points:
            fail("options", f"the wrong answer {answer!r} is accepted{where}, draw {seed}")


def _check_pool_coverage(question: Question, fail) -> None:
    """Every option of a pool must reach some student, else it is dead text."""
    seen = {o["id"] for seed in draw_seeds(question) for o in shown_options(question, seed)}
    missing = [o["id"] for o in question.data["options"] if o["id"] not in seen]
    if missing:
        fail("options", f"never drawn in {len(draw_seeds(question))} draws: {', '.join(missing)} "
             "(raise 'show' or shrink the pool)")


def _check_code(question: Question, fail) -> None:
    d = question.data
    r = grade_answer(question, SEED, d["model_solution"])
    if r.correct is not True:
        fail("model_solution", f"is rejected: {r.feedback}")
    for i, source in enumerate(d["wrong_solutions"]):
        r = grade_answer(question, SEED, source)
        if r.correct is not False:
            fail(f"wrong_solutions[{i}]", "is accepted, so the cases do not tell it apart")


def validate_bank(path=None, *, run_code: bool = True, seeds=None) -> tuple[Bank, list[str]]:
    """Load and deeply check a bank; returns the bank and every problem found.

    ``seeds``: the folder of source texts for the copying rule (default: found by
    :func:`questions.originality.find_seeds`); ``False`` or no folder found skips that rule.
    """
    bank = load_bank(path)
    problems = list(bank.errors)
    for question in bank:
        problems.extend(check_question(question, run_code=run_code))
    for line in position_problems(list(bank)) + longest_option_problems(list(bank)) + strategy_problems(list(bank)):
        # bank-wide findings name the bank's folder; per-question ones already name their file
        problems.append(f"{bank.path}: {line}" if line.startswith("(bank)") else line)
    folder = find_seeds(seeds) if seeds is not False else None
    if folder is not None:
        problems.extend(overlap_problems(bank, SeedIndex.load(folder)))
    return bank, problems
