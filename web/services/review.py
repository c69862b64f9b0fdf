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
        if data.get("try_penalty") is not None:
            assignment.try_penalty = float(data["try_penalty"])


def reload_bank(run_code: bool = False):
    """Re-read the question bank from disk and validate it; returns (bank, problems).

    Nothing to clear: every process's cached bank follows the files (``quizzes.question_bank``)."""
    from questions.check import validate_bank

    return validate_bank(run_code=run_code)
