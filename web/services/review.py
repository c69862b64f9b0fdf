"""Instructor actions behind the pages: assignment settings, the bank (regrades: ``regrade``)."""
from __future__ import annotations

from ..models import ANSWER_POLICIES, Assignment

SETTING_FIELDS = ("title", "visible", "opens_at", "deadline", "late_policy", "late_penalty",
                  "max_attempts", "rate_limit_count", "rate_limit_seconds", "feedback")


def apply_settings(assignment: Assignment, data: dict) -> None:
    """Copy the settings form's fields onto the assignment (empty numbers mean "no limit")."""
    for name in SETTING_FIELDS:
        if name in data:
            setattr(assignment, name, data[name])
    if assignment.late_penalty is None:
        assignment.late_penalty = 0.0
    if assignment.kind == "quiz" and data.get("question_ids") is not None:
        assignment.question_ids = list(data["question_ids"])
    if assignment.kind == "quiz" and data.get("answer_policy") in ANSWER_POLICIES:
        # applies to tries from now on; answers already made keep the points they earned
        assignment.answer_policy = data["answer_policy"]
        # the form shows 1/3 as 0.3333: posted back unchanged, the exact value stays
        if data.get("try_penalty") is not None and not (
                assignment.try_penalty is not None and abs(float(data["try_penalty"]) - assignment.try_penalty) < 1e-4):
            assignment.try_penalty = float(data["try_penalty"])


def quiz_order(current: list[str], ticked: list[str], positions: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The quiz's questions after a settings save: the ticked ones, in the instructor's order.

    The order is the course's teaching order, so saving the form (for a deadline, say) must
    not change it: ticked questions keep their places, newly ticked ones go to the end in
    the order given, and an edited position number moves its question there (ahead of the
    one already at that place). ``positions`` maps a question id to what its position box
    holds ("" where empty). Returns (order, {question id: error}) for boxes that are not a
    whole number from 1."""
    place = {qid: index + 1 for index, qid in enumerate(current)}
    errors: dict[str, str] = {}
    wanted: dict[str, int] = {}
    for qid in ticked:
        typed = (positions.get(qid) or "").strip()
        if not typed:
            continue
        if not typed.isdigit() or int(typed) < 1:
            errors[qid] = typed
            continue
        wanted[qid] = int(typed)
    end = len(current) + 1

    def key(item):
        arrival, qid = item
        old = place.get(qid, end)
        new = wanted.get(qid, old)
        # a moved question goes before the one that stays at its new place
        return (new, 0 if new != old else 1, old, arrival)

    ordered = sorted(enumerate(dict.fromkeys(ticked)), key=key)
    return [qid for _, qid in ordered], errors


def reload_bank(run_code: bool = False):
    """Re-read the question bank from disk and validate it; returns (bank, problems).

    Nothing to clear: every process's cached bank follows the files (``quizzes.question_bank``)."""
    from questions.check import validate_bank

    return validate_bank(run_code=run_code)
