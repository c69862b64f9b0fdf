"""How often a quiz question may be answered, what each try earns and what a student sees.

Two policies, set per quiz by the instructor (``Assignment.answer_policy``):

- ``single_try``: one try per question, final at once; its feedback (with the worked
  solution) is shown after it. Moodle's "immediate feedback", one try.
- ``penalised_tries``: several tries; each wrong one takes ``try_penalty`` of the points off
  the next, ``points = fraction * max(0, 1 - penalty * wrong_tries)`` (Moodle's "interactive
  with multiple tries", PrairieLearn's points per try). The question is final once answered
  right or when a further try could earn less than 1 % of the points (3 tries at 1/3, 4 at
1/4, 20 at the smallest penalty, 0.05). Trying
  every option in turn therefore never earns full credit unless the first try was right.

While a question still takes tries, a wrong answer shows only that it is wrong (and how
much a right answer is still worth), never the option feedback or the explanation, which
name the right answer. A question's points are the best of its tries.
"""
from __future__ import annotations

import math

from flask_babel import get_locale, gettext

from grader.i18n import T, entry, render
from questions import messages

from ..i18n import DEFAULT_LANGUAGE
from ..models import Assignment, QuizAnswer, QuizAttempt, QuizTry, utcnow

MIN_TRY_PENALTY = 0.05  # at most 20 tries: below this, options could be tried for free
MIN_TRY_SHARE = 0.01  # a further try is offered only while it can still earn 1 % of the points
DEFAULT_TRY_PENALTY = 1 / 3
POLICY_LABELS = {
    "single_try": "one try per question, feedback after it",
    "penalised_tries": "several tries, each wrong try costs a share of the points",
}


def penalty(assignment: Assignment) -> float:
    share = assignment.try_penalty if assignment.try_penalty is not None else DEFAULT_TRY_PENALTY
    return min(1.0, max(MIN_TRY_PENALTY, float(share)))


def tries_allowed(assignment: Assignment) -> int:
    """How many tries a question takes: 1, or as many as still earn ``MIN_TRY_SHARE``.

    Counting by the share earned, not by ``ceil(1 / penalty)``, keeps a penalty typed as
    0.3333 at three tries instead of adding a fourth worth 0.01 % of the points.
    """
    if assignment.answer_policy != "penalised_tries":
        return 1
    return int(math.floor((1.0 - MIN_TRY_SHARE) / penalty(assignment) + 1e-9)) + 1


def multiplier(assignment: Assignment, wrong_tries: int) -> float:
    """The share of the points a try can earn after ``wrong_tries`` wrong ones."""
    if assignment.answer_policy != "penalised_tries":
        return 1.0 if wrong_tries == 0 else 0.0
    return max(0.0, 1.0 - penalty(assignment) * wrong_tries)


def graded_tries(row: QuizAnswer) -> list[QuizTry]:
    """Tries with an automatic verdict: the ones that count against the policy."""
    return [t for t in row.tries if t.status == "graded" and t.correct is not None]


def why_closed(assignment: Assignment, row: QuizAnswer) -> str | None:
    """Why no further try is accepted for this question, or None if one is."""
    if row.state == "pending":
        return gettext("your previous answer to this question is still being graded; wait for its result")
    if row.state == "final":
        if row.correct:
            return gettext("this question is already answered correctly")
        if assignment.answer_policy == "penalised_tries":
            return gettext("no tries left for this question")
        return gettext("this quiz allows one try per question, and this one is answered")
    return None


def apply_result(attempt: QuizAttempt, row: QuizAnswer, tried: QuizTry, result: dict,
                 now=None) -> None:
    """Store a graded try's verdict on the try and its question, as the policy counts it.

    ``result`` is ``questions.AnswerResult.to_dict()`` (from this process for choice and
    numeric answers, from a grading worker for code).
    """
    assignment = attempt.assignment
    top = float(result.get("max_points") or row.max_points or 0.0)
    earned = float(result.get("points") or 0.0)
    wrong_before = sum(1 for t in graded_tries(row) if t is not tried and t.number < tried.number
                       and not t.correct)
    tried.status, tried.graded_at = "graded", now or utcnow()
    tried.correct = result.get("correct")
    tried.fraction = earned / top if top else 0.0
    tried.max_points = top
    tried.points = round(earned * multiplier(assignment, wrong_before), 6) \
        if tried.correct is not None else 0.0
    tried.feedback = str(result.get("feedback") or "")
    tried.details = _with_template(result.get("details"), result.get("feedback_i18n"))
    row.max_points = top
    row.correct, row.feedback, row.details = tried.correct, tried.feedback, tried.details
    row.points = max((t.points for t in graded_tries(row)), default=0.0)
    if tried.correct is None:  # free text: kept for the instructor, revisable until submitted
        row.state = "final" if attempt.status == "submitted" else "open"
    elif attempt.status == "submitted" or tried.correct or \
            len(graded_tries(row)) >= tries_allowed(assignment):
        row.state = "final"
    else:
        row.state = "open"
    total(attempt)


def total(attempt: QuizAttempt) -> None:
    """The attempt's score from its answers (also after a worker graded a code answer)."""
    attempt.score = sum(a.points for a in attempt.answers)
    attempt.max_score = sum(a.max_points for a in attempt.answers)
    attempt.needs_manual = any(a.answered_at is not None and a.correct is None
                               and a.state != "pending" for a in attempt.answers)


def fail_try(tried: QuizTry, reason: str, now=None) -> None:
    """A code answer the workers could not grade (host lost, grader error): say so, keep it.

    The try does not count against the policy; in an open attempt the student may send the
    answer again, in a submitted one it goes to the instructor's grading queue.
    """
    row = tried.quiz_answer
    attempt = row.attempt
    tried.status, tried.error, tried.graded_at = "failed", reason, now or utcnow()
    # stored in English with their templates, shown in the reader's language like all feedback
    _set_feedback(tried, messages.not_graded(reason))
    if attempt.status == "submitted":
        row.state, row.correct = "final", None
        _set_feedback(row, messages.not_graded_for_instructor(reason))
    else:
        row.state = "open"
        _set_feedback(row, messages.not_graded_kept(reason))
    total(attempt)


def _with_template(details, template):
    """``details`` with the feedback's template (``feedback_i18n``) beside the answer's own facts."""
    if template is None or isinstance(template, str):  # plain text: nothing to keep
        return details
    return {**(details if isinstance(details, dict) else {}), "feedback_i18n": template}


def _set_feedback(row: QuizAnswer | QuizTry, text: T) -> None:
    row.feedback = str(text)
    row.details = _with_template(row.details, entry(text))


def feedback_in(row: QuizAnswer | QuizTry, lang: str | None) -> str:
    """An answer's (or try's) stored feedback in ``lang``: from its template while the template
    is still of that very text (an instructor's comment replaces the text and is shown as
    written); feedback stored before templates were, or a comment, is looked up whole."""
    details = row.details if isinstance(row.details, dict) else {}
    template = details.get("feedback_i18n")
    if template and render(template, "en") == (row.feedback or ""):
        return render(template, lang)
    return render(row.feedback or "", lang)


def _page_language() -> str:
    return str(get_locale() or DEFAULT_LANGUAGE)


def visible_feedback(attempt: QuizAttempt, row: QuizAnswer) -> str:
    """The feedback a student may see now: all of it once final, else only the verdict."""
    if row.state == "pending":
        return gettext("Being graded by the grading workers…")
    lang = _page_language()
    details = row.details if isinstance(row.details, dict) else {}
    if row.state == "final" or attempt.status == "submitted" or row.correct is None:
        feedback = feedback_in(row, lang)
        held_back = render(details.get("explanation"), lang)  # worked solution, shown once final
        if held_back and held_back not in feedback and row.correct is not None:
            return f"{feedback}\n\n{held_back}"
        return feedback
    summary = try_summary(attempt, row)
    verdict = gettext("Partly right.") if row.points > 0 else gettext("Not right yet.")
    space = "" if lang == "zh" else " "  # Chinese sentences follow 。 with no space
    shown = verdict + space + gettext(
        "Try %(used)s of %(allowed)s; a right answer now earns up to %(share)s of the points.",
        used=summary["used"], allowed=summary["allowed"], share=format(summary["next_share"], ".0%"))
    calls = render(details.get("verdict"), lang)  # code: which test call failed, and how
    return f"{shown}{space}{calls}" if calls else shown


def final_review(attempt: QuizAttempt, row: QuizAnswer, question, lang: str) -> dict | None:
    """The question laid out with the student's answer beside the key (``questions.review``),
    or None while it is not final: the review names the right answer, so a question that still
    takes tries, a free-text answer still revisable and a code answer being graded get none.

    An unanswered question of a submitted attempt gets its key and solution; an answered
    free-text question shows its model answer once the instructor has graded it.
    """
    from questions.review import review

    submitted = attempt.status != "open"
    if row.state == "pending" or not (row.state == "final" or submitted):
        return None
    answered = row.answered_at is not None
    shown = review(question, row.seed, row.answer if answered else None,
                   answered_in=row.lang or attempt.lang or DEFAULT_LANGUAGE, lang=lang)
    details = row.details if isinstance(row.details, dict) else {}
    if shown.get("correct", row.correct) != row.correct:  # overridden, or graded by an older bank
        shown["head"] = None  # the stored feedback stays the verdict
    if question.kind == "code" and answered:  # the test calls' verdict, without the explanation
        shown["head"] = render(details.get("verdict"), lang) or None
    if question.kind == "free_text" and answered and row.correct is None:
        shown["model_answer"] = None  # shown with the instructor's grade, not before
    return shown


def try_summary(attempt: QuizAttempt, row: QuizAnswer) -> dict:
    """Tries used and allowed, and what the next one can still earn (for the page)."""
    assignment = attempt.assignment
    tries = graded_tries(row)
    wrong = sum(1 for t in tries if not t.correct)
    return {"used": len(tries), "allowed": tries_allowed(assignment),
            "next_share": multiplier(assignment, wrong), "policy": assignment.answer_policy,
            "final": row.state == "final" or attempt.status == "submitted",
            "pending": row.state == "pending"}
