"""Claiming, lease renewal and fenced completion of grading jobs.

A claim is one conditional ``UPDATE`` that moves a job to ``running`` only if it is queued or
its lease has expired, and increments ``attempts``. The new ``attempts`` value is the
claimant's fencing token: renewals and the final write only succeed while it is still the
job's current attempt, so a worker that was presumed dead and comes back cannot overwrite
the run that replaced it. SQLite serialises claims with ``BEGIN IMMEDIATE``; PostgreSQL picks
the next job with ``FOR UPDATE SKIP LOCKED`` so concurrent workers never wait on each other.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import and_, or_, select, update
from sqlalchemy.engine import Engine

from ..db import write_session, writing
from ..models import Assignment, GradingJob, Submission, utcnow

J = GradingJob


@dataclass(frozen=True)
class Claim:
    """A job this worker holds, with what grading needs."""
    job_id: int
    submission_id: int
    attempt: int  # the fencing token
    max_attempts: int
    queue: str
    task_id: str
    code: str
    device: str
    worker: str


def _claimable(now):
    expired = and_(J.status == "running", J.lease_until < now)
    return and_(or_(J.status == "queued", expired), J.attempts < J.max_attempts)


def _take(conn, job_condition, worker: str, lease_seconds: float, now) -> Claim | None:
    row = conn.execute(
        update(J).where(job_condition, _claimable(now))
        .values(status="running", attempts=J.attempts + 1, worker=worker, started_at=now,
                lease_until=now + timedelta(seconds=lease_seconds))
        .returning(J.id, J.submission_id, J.attempts, J.max_attempts, J.queue)).first()
    if row is None:
        return None
    sub = conn.execute(
        select(Submission.task_id, Submission.code, Assignment.device)
        .join(Assignment, Assignment.id == Submission.assignment_id)
        .where(Submission.id == row.submission_id)).one()
    conn.execute(update(Submission).where(Submission.id == row.submission_id)
                 .values(status="running"))
    return Claim(job_id=row.id, submission_id=row.submission_id, attempt=row.attempts,
                 max_attempts=row.max_attempts, queue=row.queue, task_id=sub.task_id,
                 code=sub.code, device=sub.device, worker=worker)


def claim_next(engine: Engine, worker: str, queues=("cpu",), lease_seconds: float = 60.0,
               now=None) -> Claim | None:
    """Claim the oldest claimable job on one of ``queues`` (the polling workers' path)."""
    now = now or utcnow()
    pick = (select(J.id).where(_claimable(now), J.queue.in_(list(queues)))
            .order_by(J.id).limit(1)
            .with_for_update(skip_locked=True)  # PostgreSQL; SQLite has BEGIN IMMEDIATE
            .scalar_subquery())
    with writing(engine).begin() as conn:
        return _take(conn, J.id == pick, worker, lease_seconds, now)


def claim_job(engine: Engine, job_id: int, worker: str, lease_seconds: float = 60.0,
              now=None) -> Claim | None:
    """Claim one job by id (a broker delivered it); None if done, held or exhausted."""
    now = now or utcnow()
    with writing(engine).begin() as conn:
        return _take(conn, J.id == job_id, worker, lease_seconds, now)


def renew_lease(engine: Engine, claim: Claim, lease_seconds: float, now=None) -> bool:
    """Extend the lease; False means another attempt took the job over (stop caring)."""
    now = now or utcnow()
    with writing(engine).begin() as conn:
        result = conn.execute(
            update(J).where(J.id == claim.job_id, J.attempts == claim.attempt,
                            J.status == "running")
            .values(lease_until=now + timedelta(seconds=lease_seconds)))
        return result.rowcount == 1


def finish(engine: Engine, claim: Claim, report: dict, now=None) -> bool:
    """Store the grading result if ``claim`` is still the job's current attempt.

    A job the reconciler failed while this worker was merely slow still takes the result:
    a real grade is better than "grading host lost". Returns False for a stale attempt,
    which leaves the database untouched.
    """
    from ..services.grading import record_result

    now = now or utcnow()
    with write_session(engine) as session:
        fenced = session.execute(
            update(J).where(J.id == claim.job_id, J.attempts == claim.attempt,
                            J.status != "done")
            .values(status="done", finished_at=now, lease_until=None, error=None))
        if fenced.rowcount != 1:
            return False
        submission = session.get(Submission, claim.submission_id)
        record_result(session, submission, report, kind="grade", job_attempt=claim.attempt,
                      worker=claim.worker, now=now)
        return True


def release(engine: Engine, claim: Claim, error: str, now=None) -> str | None:
    """The grading infrastructure failed (not the student's code): retry or give up.

    Returns the job's new status ("queued" or "failed"), or None for a stale attempt.
    """
    now = now or utcnow()
    exhausted = claim.attempt >= claim.max_attempts
    status = "failed" if exhausted else "queued"
    with write_session(engine) as session:
        fenced = session.execute(
            update(J).where(J.id == claim.job_id, J.attempts == claim.attempt,
                            J.status == "running")
            .values(status=status, lease_until=None, error=error,
                    finished_at=now if exhausted else None))
        if fenced.rowcount != 1:
            return None
        session.execute(update(Submission).where(Submission.id == claim.submission_id).values(
            status=status, error=f"grading failed: {error}" if exhausted else None))
        return status
