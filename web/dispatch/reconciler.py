"""The reconciler: nothing stays queued or running forever.

- A ``running`` job whose lease expired lost its worker (killed, host gone). With attempts
  left it is re-notified (a polling worker would claim it anyway); at ``max_attempts`` it is
  marked failed with "grading host lost", which the student and the instructor see.
- A ``queued`` job not claimed within ``queued_stale_seconds`` may have lost its message
  (broker restart, publish failure); it is re-notified. Duplicates are harmless: claims are
  conditional and results are fenced.
- A queued job on the ``gpu`` queue whose assignment only prefers a GPU (``prefer-gpu``) and
  that no GPU worker claimed within ``gpu_fallback_seconds`` moves to the ``cpu`` queue.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy import and_, func, or_, select, update
from sqlalchemy.engine import Engine

from ..db import write_session
from ..models import PREFER_GPU, Assignment, GradingJob, Submission, utcnow

log = logging.getLogger(__name__)
J = GradingJob
HOST_LOST = "grading host lost"


@dataclass
class ReconcileReport:
    failed: list[int] = field(default_factory=list)      # job ids given up on
    renotified: list[int] = field(default_factory=list)  # job ids sent again
    to_cpu: list[int] = field(default_factory=list)      # prefer-gpu jobs moved to the cpu queue

    def __bool__(self) -> bool:
        return bool(self.failed or self.renotified)


def reconcile(engine: Engine, dispatcher=None, *, queued_stale_seconds: float = 120.0,
              gpu_fallback_seconds: float | None = None, now=None) -> ReconcileReport:
    now = now or utcnow()
    report = ReconcileReport()
    expired = and_(J.status == "running", J.lease_until < now)
    with write_session(engine) as session:
        lost = session.execute(
            select(J.id, J.attempts, J.submission_id, J.quiz_try_id)
            .where(expired, J.attempts >= J.max_attempts)).all()
        for job_id, attempts, submission_id, quiz_try_id in lost:
            message = f"{HOST_LOST}: the worker stopped responding during {attempts} attempts"
            changed = session.execute(
                update(J).where(J.id == job_id, J.attempts == attempts, expired)
                .values(status="failed", error=message, finished_at=now, lease_until=None))
            if changed.rowcount == 1:
                if quiz_try_id is not None:  # a quiz code answer: kept, marked not graded
                    from ..services.quiz_grading import fail_job

                    fail_job(session, quiz_try_id, message, now)
                else:
                    session.execute(update(Submission).where(Submission.id == submission_id)
                                    .values(status="failed", error=message))
                report.failed.append(job_id)

        fallback = now - timedelta(seconds=queued_stale_seconds if gpu_fallback_seconds is None
                                   else gpu_fallback_seconds)
        preferring = (select(Submission.id)
                      .join(Assignment, Assignment.id == Submission.assignment_id)
                      .where(Assignment.device == PREFER_GPU))
        report.to_cpu = list(session.scalars(
            select(J.id).where(J.status == "queued", J.queue == "gpu", J.queued_at < fallback,
                               J.submission_id.in_(preferring))))
        if report.to_cpu:  # notified below on their new queue
            session.execute(update(J).where(J.id.in_(report.to_cpu), J.status == "queued")
                            .values(queue="cpu", notified_at=None))

        stale = now - timedelta(seconds=queued_stale_seconds)
        waiting = and_(J.status == "queued", func.coalesce(J.notified_at, J.queued_at) < stale)
        if report.to_cpu:
            waiting = or_(waiting, J.id.in_(report.to_cpu))
        rows = session.execute(
            select(J.id, J.queue).where(or_(and_(expired, J.attempts < J.max_attempts), waiting))
            .order_by(J.id)).all()
        if rows:
            session.execute(update(J).where(J.id.in_([r.id for r in rows]))
                            .values(notified_at=now))
    if rows and dispatcher is not None:
        dispatcher.notify([(r.id, r.queue) for r in rows])
    report.renotified = [r.id for r in rows]
    if report:
        log.info("reconciler: failed %s, re-notified %s, moved to cpu %s", report.failed,
                 report.renotified, report.to_cpu)
    return report
