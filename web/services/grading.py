"""Storing grader reports, and finding the function that grades."""
from __future__ import annotations

import importlib

from sqlalchemy.orm import Session

from sqlalchemy import func, insert, select, update

from grader.jsonsafe import json_safe

from ..dispatch.reconciler import ReconcileReport, reconcile
from ..models import JobStatus, StoredCheck, ManualGrade, Result, Submission, utcnow


def load_grade_function(spec: str = "grader.grading:grade_source"):
    """Import ``module:function``; the worker calls it as ``f(code, task, sandbox=, device=)``."""
    module, _, attr = spec.partition(":")
    if not attr:
        raise ValueError(f"grade function {spec!r}: expected 'module:function'")
    return getattr(importlib.import_module(module), attr)


def grading_seed(config: dict, task_id: str, code: str) -> int:
    """The inputs' seed for one submission: the same code gets the same inputs (and score) on every
    run and regrade, and nobody without the server's secret can compute them.

    An HMAC of the task, the code and the grader version under a key derived from SECRET_KEY; a
    new grader version draws new inputs (regrades report the version change anyway).
    """
    import hashlib
    import hmac

    from grader import GRADER_VERSION
    key = str(config.get("SECRET_KEY") or "").encode()
    if not key:
        raise ValueError("no grading secret: set ATTN_GRADER_SECRET_KEY")
    key = hmac.new(key, b"attn-grader grading seed", hashlib.sha256).digest()
    message = b"\x00".join([task_id.encode(), GRADER_VERSION.encode(), code.encode("utf-8", "surrogateescape")])
    return int.from_bytes(hmac.new(key, message, hashlib.sha256).digest()[:8], "big") >> 2


def report_to_dict(report) -> dict:
    """A ``GradeReport`` (or a dict) as strict JSON: NaN and infinities become strings
    (PostgreSQL's JSON rejects the bare tokens). The worker calls it once per run."""
    data = report.to_dict() if hasattr(report, "to_dict") else dict(report)
    return json_safe(data)


def error_text(error) -> str | None:
    """The report's ``error`` (None, a string or {kind, message}) as one line for lists."""
    if not error:
        return None
    if isinstance(error, dict):
        kind, message = error.get("kind"), error.get("message") or ""
        return f"{kind}: {message}" if kind else message or str(error)
    return str(error)


def effective_score(submission: Submission, score: float) -> float:
    """The grader's score after the assignment's late penalty."""
    assignment = submission.assignment
    if submission.late and assignment.late_policy == "penalty":
        return round(score * max(0.0, 1.0 - assignment.late_penalty), 6)
    return score


def record_result(session: Session, submission: Submission, data: dict, *, kind: str = "grade",
                  job_attempt: int | None = None, worker: str | None = None,
                  now=None) -> Result:
    """Add a Result with one stored check per check of ``data`` (a report as
    ``report_to_dict`` gives it); the submission mirrors it as current."""
    family_points = submission.assignment.family_points  # read before the Result joins the session
    result = Result(
        submission=submission, kind=kind, job_attempt=job_attempt, worker=worker,
        score=float(data.get("score") or 0.0), max_score=float(data.get("max_score") or 0.0),
        passed=bool(data.get("passed")), error=error_text(data.get("error")),
        grader_version=str(data.get("grader_version") or "unknown"),
        sandbox=str(data["sandbox"]) if data.get("sandbox") else None,
        report=data, created_at=now or utcnow())
    if family_points:  # the instructor's points per family, applied to the grader's verdicts
        from .family_points import reweighted
        result.score, result.max_score = reweighted(data, family_points)
    session.add(result)
    session.flush()  # the result's id, for its checks' rows
    # One executemany, no ids read back (psycopg sends the rows in one pipelined round trip): the
    # unit of work's per-object bookkeeping for the 30 checks was a quarter of storing a result
    # (2.5 of 10 ms a job on PostgreSQL). One INSERT ... VALUES carrying all the rows was
    # slower than this (measured: 16 ms against 9 to store a result on PostgreSQL).
    rows = [{"result_id": result.id, "position": position, "check_id": str(check.get("id", position)),
             "passed": bool(check.get("passed")), "points": float(check.get("points") or 0.0),
             "max_points": float(check.get("max_points") or 0.0),
             "message": str(check.get("message") or ""), "details": check.get("details")}
            for position, check in enumerate(data.get("checks") or [])]
    if rows:
        session.execute(insert(StoredCheck), rows)
    session.expire(result, ["checks"])  # read back from the database if anyone asks
    submission.status = JobStatus.DONE
    submission.score = effective_score(submission, result.score)
    submission.max_score = result.max_score
    submission.grader_version = result.grader_version
    submission.error = result.error
    override = latest_override(session, submission)
    if override is not None:  # an instructor's score stands until they change it
        submission.score = override.points
    return result


def latest_override(session: Session, submission: Submission) -> ManualGrade | None:
    """The instructor's latest override of the submission's score, if any."""
    if submission.id is None:
        return None
    return session.scalar(select(ManualGrade).where(ManualGrade.submission_id == submission.id)
                          .order_by(ManualGrade.id.desc()).limit(1))


def overridden_count(session: Session, submission_ids: list[int]) -> int:
    """How many of the submissions carry an instructor's override."""
    if not submission_ids:
        return 0
    return session.scalar(select(func.count(func.distinct(ManualGrade.submission_id)))
                          .where(ManualGrade.submission_id.in_(submission_ids))) or 0


# ---- what a grading job's end writes (the worker hands these to web.dispatch.claim) --------

def record_job_result(session: Session, claim, report: dict, now) -> None:
    """Store a claimed job's report: on the quiz try it graded, or as the submission's next
    ``Result`` ("grade" the first time, "regrade" after). ``claim`` is the worker's
    ``web.dispatch.claim.Claim``; this runs inside ``claim.finish``'s fenced transaction."""
    from sqlalchemy.orm import joinedload

    if claim.quiz_try_id is not None:
        from .quiz_grading import record_result as record_quiz_result

        record_quiz_result(session, claim.quiz_try_id, report, now)
        return
    # with its assignment, which record_result reads (the late penalty, family points)
    submission = session.get(Submission, claim.submission_id,
                             options=[joinedload(Submission.assignment)])
    graded_before = session.scalar(select(Result.id).where(
        Result.submission_id == submission.id).limit(1)) is not None  # not every report loaded
    record_result(session, submission, report, kind="regrade" if graded_before else "grade",
                  job_attempt=claim.attempt, worker=claim.worker, now=now)


def record_job_failure(session: Session, claim, status: str, error: str, now) -> None:
    """Mirror a released job on what it grades: queued again, or failed with the reason
    (``claim.release``'s fenced transaction; ``status`` is the job's new one)."""
    failed = status == JobStatus.FAILED
    if claim.quiz_try_id is not None:
        if failed:
            from .quiz_grading import fail_job

            fail_job(session, claim.quiz_try_id, f"grading failed: {error}", now)
        return
    session.execute(update(Submission).where(Submission.id == claim.submission_id).values(
        status=status, error=f"grading failed: {error}" if failed else None))


def record_job_lost(session: Session, job, reason: str, now) -> None:
    """Mirror a job the reconciler gave up on (its workers kept vanishing) on what it grades:
    a quiz code answer is kept and marked not graded, a submission fails with the reason.
    ``job`` carries ``submission_id`` and ``quiz_try_id``; this runs inside the reconciler's
    transaction that failed the job."""
    if job.quiz_try_id is not None:
        from .quiz_grading import fail_job

        fail_job(session, job.quiz_try_id, reason, now)
        return
    session.execute(update(Submission).where(Submission.id == job.submission_id)
                    .values(status=JobStatus.FAILED, error=reason))


def reconcile_jobs(engine, dispatcher=None, **options) -> ReconcileReport:
    """A reconciler round (``web.dispatch.reconciler.reconcile``, same options) that records
    the jobs it gives up on with ``record_job_lost``: the round every caller runs."""
    return reconcile(engine, dispatcher, record_lost=record_job_lost, **options)
