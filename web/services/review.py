"""Instructor actions behind the pages: regrade one submission, assignment settings, the bank."""
from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..models import ANSWER_POLICIES, Assignment, GradingJob, Submission, utcnow

SETTING_FIELDS = ("title", "visible", "opens_at", "deadline", "late_policy", "late_penalty",
                  "max_attempts", "rate_limit_count", "rate_limit_seconds", "feedback")


RETRY_BUDGET = 3  # claims the regrade may use, as for a new submission


def _requeue(job, now) -> None:
    """Back to ``queued`` with a fresh budget of claims.

    ``attempts`` keeps counting up: it is the fencing token, so a worker still holding an
    old attempt can never match the new run's.
    """
    job.max_attempts = job.attempts + RETRY_BUDGET
    job.status, job.error, job.worker, job.lease_until = "queued", None, None, None
    job.queued_at, job.notified_at, job.started_at, job.finished_at = now, now, None, None
    job.submission.status = "queued"


def requeue_submission(session: Session, submission: Submission, dispatcher=None,
                       now=None) -> None:
    """Grade the submission again with the current grader, through the normal job queue.

    The job goes back to ``queued`` with a fresh budget of claims; the worker's result is added
    as a new ``Result`` (earlier ones stay on record) and becomes the current one. A job that
    is queued or running already is left alone.
    """
    job = submission.job
    if job is None:
        raise ValueError(f"submission {submission.id} has no grading job")
    if job.status in ("queued", "running"):
        raise ValueError(f"submission {submission.id} is already {job.status}")
    _requeue(job, now or utcnow())
    session.commit()
    if dispatcher is not None:
        dispatcher.notify([(job.id, job.queue)])


def requeue_assignment(session: Session, assignment: Assignment, dispatcher=None,
                       now=None) -> int:
    """Queue every finished submission of ``assignment`` for grading again; returns how many."""
    now = now or utcnow()
    jobs = session.scalars(
        select(GradingJob).join(Submission)
        .where(Submission.assignment_id == assignment.id,
               GradingJob.status.in_(("done", "failed")))).all()
    for job in jobs:
        _requeue(job, now)
    session.commit()
    if dispatcher is not None and jobs:
        dispatcher.notify([(job.id, job.queue) for job in jobs])
    return len(jobs)


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
