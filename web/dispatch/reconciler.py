"""The reconciler: nothing stays queued or running forever.

- A ``running`` job whose lease expired lost its worker (killed, host gone). With attempts
  left, the next claim on its queue takes it, ahead of every job queued after it
  (``claim.claim_next``), so it needs no message of its own; one doorbell is rung for it
  anyway, once per lost attempt and by one host only, to wake a worker at once if all are
  idle. At ``max_attempts`` it is marked failed with "grading host lost", which the student
  and the instructor see: the job here, and what it grades by the ``record_lost`` function
  the caller hands in, in the same transaction (``services.grading.reconcile_jobs`` hands in
  the services' one), so dispatch imports no services.
- A queued job on the ``gpu`` queue whose assignment only prefers a GPU (``prefer-gpu``) and
  that no GPU worker claimed within ``gpu_fallback_seconds`` moves to the ``cpu`` queue, and
  that queue's doorbell is rung for it.
- A job that merely waits in a long queue is not sent again: its own message, or any later
  one, claims it in turn, and an idle worker looks at the database by itself. (Re-sending
  every job that had waited two minutes added 1,623 messages to a 1,000-job burst.)

Doorbells are marked (``notified_at``) by a conditional update in the same transaction that
sends them: two hosts' reconcilers never ring for the same job, and a send that fails rolls
the mark back, so the next run tries again.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy import and_, or_, select, update
from sqlalchemy.engine import Engine

from ..db import write_session
from ..models import HOST_LOST, PREFER_GPU, Assignment, GradingJob, JobStatus, Submission, utcnow

log = logging.getLogger(__name__)
J = GradingJob


@dataclass
class ReconcileReport:
    failed: list[int] = field(default_factory=list)      # job ids given up on
    renotified: list[int] = field(default_factory=list)  # job ids sent again
    to_cpu: list[int] = field(default_factory=list)      # prefer-gpu jobs moved to the cpu queue

    def __bool__(self) -> bool:
        return bool(self.failed or self.renotified)


def reconcile(engine: Engine, dispatcher=None, *, record_lost, queued_stale_seconds: float = 120.0,
              gpu_fallback_seconds: float | None = None, now=None) -> ReconcileReport:
    """One round. ``record_lost(session, job, reason, now)`` mirrors a job given up on
    (``job`` carries ``submission_id`` and ``quiz_try_id``) inside the transaction that fails
    it."""
    now = now or utcnow()
    report = ReconcileReport()
    expired = and_(J.status == JobStatus.RUNNING, J.lease_until < now)
    with write_session(engine) as session:
        lost = session.execute(
            select(J.id, J.attempts, J.submission_id, J.quiz_try_id)
            .where(expired, J.attempts >= J.max_attempts)).all()
        for job in lost:
            message = f"{HOST_LOST}: the worker stopped responding during {job.attempts} attempts"
            changed = session.execute(
                update(J).where(J.id == job.id, J.attempts == job.attempts, expired)
                .values(status=JobStatus.FAILED, error=message, finished_at=now,
                        lease_until=None))
            if changed.rowcount == 1:
                record_lost(session, job, message, now)
                report.failed.append(job.id)

        fallback = now - timedelta(seconds=queued_stale_seconds if gpu_fallback_seconds is None
                                   else gpu_fallback_seconds)
        preferring = (select(Submission.id)
                      .join(Assignment, Assignment.id == Submission.assignment_id)
                      .where(Assignment.device == PREFER_GPU))
        report.to_cpu = list(session.scalars(
            select(J.id).where(J.status == JobStatus.QUEUED, J.queue == "gpu", J.queued_at < fallback,
                               J.submission_id.in_(preferring))))
        if report.to_cpu:  # notified below on their new queue
            session.execute(update(J).where(J.id.in_(report.to_cpu), J.status == JobStatus.QUEUED)
                            .values(queue="cpu", notified_at=None))

        # Not rung since this attempt's lease ran out (a claim sets the lease after the last
        # ring), or never rung on its present queue.
        unrung = and_(expired, J.attempts < J.max_attempts,
                      or_(J.notified_at.is_(None), J.notified_at < J.lease_until))
        moved = and_(J.status == JobStatus.QUEUED, J.notified_at.is_(None))
        rows = session.execute(update(J).where(or_(unrung, moved)).values(notified_at=now)
                               .returning(J.id, J.queue)).all()
        rows.sort()
        if rows and dispatcher is not None:  # before the commit: a failed send keeps no mark
            dispatcher.notify([(r.id, r.queue) for r in rows])
    report.renotified = [r.id for r in rows]
    if report:
        log.info("reconciler: failed %s, re-notified %s, moved to cpu %s", report.failed,
                 report.renotified, report.to_cpu)
    return report
