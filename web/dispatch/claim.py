"""Claiming, lease renewal and fenced completion of grading jobs.

A claim is one conditional ``UPDATE`` that moves a job to ``running`` only if it is queued or
its lease has expired, and increments ``attempts``. The new ``attempts`` value is the
claimant's fencing token: renewals and the final write only succeed while it is still the
job's current attempt, so a worker that was presumed dead and comes back cannot overwrite
the run that replaced it. SQLite serialises claims with ``BEGIN IMMEDIATE``; PostgreSQL picks
the next job with ``FOR UPDATE SKIP LOCKED`` so concurrent workers never wait on each other.

Every claim takes the job that has waited longest (``queued_at``, then id), whether a worker
polls or a broker message woke it: a job whose worker was lost keeps its place, so it is
graded again ahead of everything queued after it, and a lost message delays nobody. The pick
is a look-up in ``ix_grading_jobs_pending`` (unfinished jobs only), however long the history.

A job grades either a submission or a quiz code answer (``quiz_try_id``); both go through
the same claim, lease and fence, and differ only in what is read before and written after.
What is written after belongs to the caller: ``finish`` and ``release`` hold the fence and
hand its transaction to the recording function the worker gives them, so this module
imports no services.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import and_, or_, select, update
from sqlalchemy.engine import Engine

from ..db import write_session, writing
from ..models import (PENDING_JOBS, GradingJob, JobStatus, QuizAnswer, QuizAttempt, QuizTry,
                      Submission, utcnow)

J = GradingJob


@dataclass(frozen=True)
class Claim:
    """A job this worker holds, with what grading needs."""
    job_id: int
    submission_id: int | None
    attempt: int  # the fencing token
    max_attempts: int
    queue: str
    task_id: str
    code: str
    device: str  # the torch device the run uses (``run_device``)
    worker: str
    # a quiz code answer: the try, and the variant it is graded on
    quiz_try_id: int | None = None
    question_id: str | None = None
    seed: int | None = None
    lang: str = "en"


def run_device(queue: str) -> str:
    """The torch device a job on ``queue`` is graded on: the gpu queue's workers own a GPU."""
    return "cuda" if queue == "gpu" else "cpu"


def _claimable(now):
    expired = and_(J.status == JobStatus.RUNNING, J.lease_until < now)
    return and_(or_(J.status == JobStatus.QUEUED, expired), J.attempts < J.max_attempts)


def _take(conn, job_condition, worker: str, lease_seconds: float, now) -> Claim | None:
    row = conn.execute(
        update(J).where(job_condition, _claimable(now))
        .values(status=JobStatus.RUNNING, attempts=J.attempts + 1, worker=worker, started_at=now,
                lease_until=now + timedelta(seconds=lease_seconds))
        .returning(J.id, J.submission_id, J.quiz_try_id, J.attempts, J.max_attempts,
                   J.queue)).first()
    if row is None:
        return None
    if row.quiz_try_id is not None:
        answer = conn.execute(
            select(QuizTry.answer, QuizAnswer.question_id, QuizAnswer.seed, QuizAttempt.lang)
            .join(QuizAnswer, QuizAnswer.id == QuizTry.quiz_answer_id)
            .join(QuizAttempt, QuizAttempt.id == QuizAnswer.attempt_id)
            .where(QuizTry.id == row.quiz_try_id)).one()
        return Claim(job_id=row.id, submission_id=None, attempt=row.attempts,
                     max_attempts=row.max_attempts, queue=row.queue,
                     task_id=f"quiz:{answer.question_id}", code=answer.answer,
                     device=run_device(row.queue),
                     worker=worker, quiz_try_id=row.quiz_try_id,
                     question_id=answer.question_id, seed=answer.seed, lang=answer.lang)
    sub = conn.execute(update(Submission).where(Submission.id == row.submission_id)
                       .values(status=JobStatus.RUNNING)
                       .returning(Submission.task_id, Submission.code)).one()
    return Claim(job_id=row.id, submission_id=row.submission_id, attempt=row.attempts,
                 max_attempts=row.max_attempts, queue=row.queue, task_id=sub.task_id,
                 code=sub.code, device=run_device(row.queue), worker=worker)


def next_job(queues, now):
    """The id of the job on one of ``queues`` that has waited longest (a SELECT; claim_next
    locks and takes it). Among the unfinished jobs, the partial index's rows, "queued, or
    running with an expired lease" is "queued or lease_until < now": written so, no other
    index can serve the OR, and the index is read in claim order up to its first match."""
    return (select(J.id).where(PENDING_JOBS, J.queue.in_(list(queues)),
                               or_(J.status == JobStatus.QUEUED, J.lease_until < now),
                               J.attempts < J.max_attempts)
            .order_by(J.queued_at, J.id).limit(1))


def claim_next(engine: Engine, worker: str, queues=("cpu",), lease_seconds: float = 60.0,
               now=None) -> Claim | None:
    """Claim the job on one of ``queues`` that has waited longest; None if there is none."""
    now = now or utcnow()
    pick = (next_job(queues, now)
            .with_for_update(skip_locked=True)  # PostgreSQL; SQLite has BEGIN IMMEDIATE
            .scalar_subquery())
    with writing(engine).begin() as conn:
        return _take(conn, J.id == pick, worker, lease_seconds, now)


def claim_job(engine: Engine, job_id: int, worker: str, lease_seconds: float = 60.0,
              now=None) -> Claim | None:
    """Claim job ``job_id`` itself if it is claimable (queued, or its lease ran out); None if
    not. Workers claim by age (``claim_next``: a broker message only rings the queue's
    doorbell); this by-id claim is what ../shared/tools/scale/claims.py measures it against."""
    now = now or utcnow()
    with writing(engine).begin() as conn:
        return _take(conn, J.id == job_id, worker, lease_seconds, now)


def renew_lease(engine: Engine, claim: Claim, lease_seconds: float, now=None) -> bool:
    """Extend the lease; False means another attempt took the job over (stop caring)."""
    now = now or utcnow()
    with writing(engine).begin() as conn:
        result = conn.execute(
            update(J).where(J.id == claim.job_id, J.attempts == claim.attempt,
                            J.status == JobStatus.RUNNING)
            .values(lease_until=now + timedelta(seconds=lease_seconds)))
        return result.rowcount == 1


def finish(engine: Engine, claim: Claim, report: dict, record, now=None) -> bool:
    """Mark the job done if ``claim`` is still its current attempt, and in that transaction
    let ``record(session, claim, report, now)`` store what the grading produced (the
    worker passes ``services.grading.record_job_result``: dispatch calls down, never up).

    A job the reconciler failed while this worker was merely slow still takes the result:
    a real grade is better than "grading host lost". Returns False for a stale attempt,
    which leaves the database untouched.
    """
    now = now or utcnow()
    with write_session(engine) as session:
        fenced = session.execute(
            update(J).where(J.id == claim.job_id, J.attempts == claim.attempt,
                            J.status != JobStatus.DONE)
            .values(status=JobStatus.DONE, finished_at=now, lease_until=None, error=None))
        if fenced.rowcount != 1:
            return False
        record(session, claim, report, now)
        return True


def release(engine: Engine, claim: Claim, error: str, record, now=None) -> str | None:
    """The grading infrastructure failed (not the student's code): retry or give up, and
    let ``record(session, claim, status, error, now)`` mirror it on what the job grades
    (``services.grading.record_job_failure``).

    Returns the job's new status ("queued" or "failed"), or None for a stale attempt.
    """
    now = now or utcnow()
    exhausted = claim.attempt >= claim.max_attempts
    status = JobStatus.FAILED if exhausted else JobStatus.QUEUED
    with write_session(engine) as session:
        fenced = session.execute(
            update(J).where(J.id == claim.job_id, J.attempts == claim.attempt,
                            J.status == JobStatus.RUNNING)
            .values(status=status, lease_until=None, error=error,
                    finished_at=now if exhausted else None))
        if fenced.rowcount != 1:
            return None
        record(session, claim, status.value, error, now)
        return status.value
