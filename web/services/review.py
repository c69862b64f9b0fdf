"""Instructor actions behind the pages: regrade one submission, assignment settings, the bank."""
from __future__ import annotations

from sqlalchemy.orm import Session

from ..models import Assignment, Submission, utcnow

SETTING_FIELDS = ("title", "visible", "opens_at", "deadline", "late_policy", "late_penalty",
                  "max_attempts", "rate_limit_count", "rate_limit_seconds", "feedback")


def requeue_submission(session: Session, submission: Submission, dispatcher=None,
                       now=None) -> None:
    """Grade the submission again with the current grader, through the normal job queue.

    The job goes back to ``queued`` with a fresh attempt budget; the worker's result is added
    as a new ``Result`` (earlier ones stay on record) and becomes the current one. A job that
    is queued or running already is left alone.
    """
    job = submission.job
    if job is None:
        raise ValueError(f"submission {submission.id} has no grading job")
    if job.status in ("queued", "running"):
        raise ValueError(f"submission {submission.id} is already {job.status}")
    now = now or utcnow()
    job.status, job.attempts, job.error, job.worker = "queued", 0, None, None
    job.queued_at, job.notified_at, job.started_at, job.finished_at = now, now, None, None
    job.lease_until = None
    submission.status = "queued"
    session.commit()
    if dispatcher is not None:
        dispatcher.notify([(job.id, job.queue)])


def apply_settings(assignment: Assignment, data: dict) -> None:
    """Copy the settings form's fields onto the assignment (empty numbers mean "no limit")."""
    for name in SETTING_FIELDS:
        if name in data:
            setattr(assignment, name, data[name])
    if assignment.late_penalty is None:
        assignment.late_penalty = 0.0
    if assignment.kind == "quiz" and data.get("question_ids") is not None:
        assignment.question_ids = list(data["question_ids"])


def reload_bank(run_code: bool = False):
    """Re-read the question bank from disk; returns (bank, problems)."""
    from questions.check import validate_bank

    from . import quizzes

    quizzes._bank.cache_clear()  # the next quiz page loads the files again
    return validate_bank(run_code=run_code)
