"""Regrading: submissions go back on the job queue and the workers grade them again.

The one regrade path, for the instructor pages and ``attn-grader regrade`` alike:
``queue_regrades`` puts each submission's job back to ``queued`` with a fresh budget of claims
(one transaction), then notifies the workers. A worker claims the job with the same lease and
fence as a first grade (``web.dispatch.claim``) and stores a ``Result`` of kind "regrade"; the
earlier results stay on record and an instructor's override stays the score
(``grading.record_result``). A worker that dies mid-regrade is handled as for any job: the
lease expires, another worker takes it, and the reconciler fails it once its claims run out.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from flask_babel import gettext
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ..models import Assignment, GradingJob, JobStatus, Submission, utcnow
from .grading import latest_override

RETRY_BUDGET = 3  # claims a regrade may use, as for a new submission
FINISHED = ("done", "failed")


@dataclass(frozen=True)
class Regrade:
    """One submission to grade again, with what it stood at before."""
    submission_id: int
    job_id: int | None
    email: str
    old_score: float | None
    old_version: str | None
    overridden: bool
    skipped: str | None  # why it is not queued (None: it is)


def assignment_submissions(session: Session, assignment: Assignment, versions=(),
                           not_versions=()) -> list[Submission]:
    """The assignment's submissions; ``versions``: only those whose current result came from
    one of these grader versions; ``not_versions``: none of those (a submission not graded
    yet has no version: it is left out by ``versions``, kept by ``not_versions``)."""
    query = select(Submission).where(Submission.assignment_id == assignment.id)
    if versions:
        query = query.where(Submission.grader_version.in_(list(versions)))
    if not_versions:
        query = query.where(Submission.grader_version.is_(None)
                            | Submission.grader_version.not_in(list(not_versions)))
    return list(session.scalars(query.order_by(Submission.id)))


def versions_graded(session: Session, assignment: Assignment) -> dict[str | None, int]:
    """How many of the assignment's submissions each grader version scored last."""
    rows = session.execute(select(Submission.grader_version, func.count(Submission.id))
                           .where(Submission.assignment_id == assignment.id)
                           .group_by(Submission.grader_version))
    return {version: count for version, count in rows}


def why_not_regradable(submission: Submission) -> str | None:
    """None if the submission can be queued again; else the reason, as a phrase."""
    job = submission.job
    if job is None:
        return gettext("submission %(number)s has no grading job", number=submission.id)
    if job.status not in FINISHED:  # its grading is under way: that run is the current grader's
        return gettext("submission %(number)s is already %(status)s", number=submission.id,
                       status=job.status)
    return None


def plan_regrades(session: Session, submissions: list[Submission]) -> list[Regrade]:
    """What ``queue_regrades`` would do, storing nothing (the CLI's ``--dry-run``)."""
    return [Regrade(submission_id=sub.id, job_id=sub.job.id if sub.job else None,
                    email=sub.user.email, old_score=sub.score, old_version=sub.grader_version,
                    overridden=latest_override(session, sub) is not None,
                    skipped=why_not_regradable(sub))
            for sub in submissions]


def queue_regrades(session: Session, submissions: list[Submission], dispatcher=None,
                   now=None) -> list[Regrade]:
    """Queue every finished submission of ``submissions`` for grading again; commit, then
    notify ``dispatcher``. Returns the plan: skipped ones (queued or running already) say why."""
    now = now or utcnow()
    plan = plan_regrades(session, submissions)
    jobs = [sub.job for sub, item in zip(submissions, plan) if item.skipped is None]
    for job in jobs:
        _requeue(job, now)
    session.commit()  # the truth first, then the delivery (the reconciler re-sends lost ones)
    if dispatcher is not None and jobs:
        dispatcher.notify([(job.id, job.queue) for job in jobs])
    return plan


def _requeue(job: GradingJob, now) -> None:
    """Back to ``queued`` with a fresh budget of claims.

    ``attempts`` keeps counting up: it is the fencing token, so a worker still holding an
    old attempt can never match the new run's.
    """
    job.max_attempts = job.attempts + RETRY_BUDGET
    job.status, job.error, job.worker, job.lease_until = JobStatus.QUEUED, None, None, None
    job.queued_at, job.notified_at, job.started_at, job.finished_at = now, now, None, None
    job.submission.status = JobStatus.QUEUED


def wait_for_jobs(session_maker, job_ids: list[int], timeout: float, progress=None,
                  interval: float = 0.5) -> bool:
    """Wait until every job is done or failed (or ``timeout`` s pass); returns whether all
    finished. ``progress(finished_count)`` is called after each look at the database."""
    deadline = time.monotonic() + timeout
    while True:
        with session_maker() as session:
            finished = session.scalar(select(func.count(GradingJob.id)).where(
                GradingJob.id.in_(job_ids), GradingJob.status.in_(FINISHED)))
        if progress is not None:
            progress(finished)
        if finished == len(job_ids):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(min(interval, max(0.0, deadline - time.monotonic())))
