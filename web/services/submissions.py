"""Accepting submissions and showing them.

``submit`` validates, commits the submission and its grading job in one transaction, and
only then notifies the workers: if the notification is lost the job is still in the
database and the reconciler re-sends it.

Refusals are in the request's language (``gettext``; English for the API, which sends no
language, and outside a request).
"""
from __future__ import annotations

import hashlib
import logging
import math
from datetime import datetime, timedelta

from flask_babel import gettext
from sqlalchemy import func, select
from sqlalchemy.orm import Session, joinedload

from grader.client import wait_phrase
from grader.notebook import CellMap, NotebookError, annotate_check, is_notebook, notebook_script

from ..i18n import grader_text
from ..models import Assignment, GradingJob, JobStatus, Submission, User, utcnow
from . import hidden_checks
from .extensions import limits_for, lock_student

log = logging.getLogger(__name__)
DEFAULT_MAX_BYTES = 64 * 1024
OUTPUT_SHOWN = 2000  # characters of the student's stdout/stderr shown with a result


class SubmissionRejected(Exception):
    """A submission that is not accepted, with the HTTP status that says why."""

    def __init__(self, message: str, status: int = 400, retry_after: int | None = None):
        super().__init__(message)
        self.message, self.status, self.retry_after = message, status, retry_after


def decode_source(raw: bytes | str, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """The source as text; rejects empty, oversized and non-UTF-8 files with a message."""
    # surrogatepass: a lone surrogate in JSON text ("\ud800") becomes bytes the UTF-8 check refuses
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if len(data) > max_bytes:
        raise SubmissionRejected(
            gettext("the file is %(size)s bytes; the limit is %(limit)s bytes",
                    size=len(data), limit=max_bytes), 413)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SubmissionRejected(
            gettext("the file is not UTF-8 text (byte %(byte)s is invalid); save it as UTF-8",
                    byte=exc.start)) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text.strip():
        raise SubmissionRejected(gettext("the file is empty"))
    if "\x00" in text:
        raise SubmissionRejected(gettext("the file contains NUL bytes; it is not Python source"))
    return text


def notebook_code(raw: bytes | str, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """A .ipynb's code cells as the script that is stored and graded (``grader.notebook``).

    The notebook itself may be larger than a .py (its outputs and metadata are dropped); the
    script is then held to the same limit as a .py file.
    """
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if len(data) > 2 * max_bytes:
        raise SubmissionRejected(
            gettext("the notebook is %(size)s bytes; the limit is %(limit)s bytes: clear its "
                    "outputs (Edit → Clear All Outputs) and save it again",
                    size=len(data), limit=2 * max_bytes), 413)
    try:
        return notebook_script(data)
    except NotebookError as exc:
        raise SubmissionRejected(gettext("notebook not accepted: %(reason)s", reason=exc)) from None


def notebook_view(submission: Submission, checks: list[dict], error: str | None
                  ) -> tuple[list[dict], str | None, dict | None]:
    """For a notebook: the checks and error with their lines told as cells, and which cell
    defines the task's function; a .py submission's checks and error come back unchanged."""
    if not is_notebook(submission.filename):
        return checks, error, None
    from grader.tasks import TITLES

    cells = CellMap.from_script(submission.code)
    function = TITLES.get(submission.task_id, ("", ""))[1]
    return ([annotate_check(c, cells) for c in checks],
            cells.message(error, bare_lines=True) if error else error,
            {"function": function, "function_cell": cells.defining_cell(submission.code, function),
             "code_cells": sorted(set(cells.cells))})


def attempts_used(session: Session, user: User, assignment: Assignment) -> int:
    return session.scalar(select(func.count(Submission.id)).where(
        Submission.user_id == user.id, Submission.assignment_id == assignment.id)) or 0


def attempts_by_assignment(session: Session, user: User) -> dict[int, int]:
    """``attempts_used`` for every assignment the user has submitted to, in one statement."""
    return dict(session.execute(select(Submission.assignment_id, func.count(Submission.id))
                                .where(Submission.user_id == user.id)
                                .group_by(Submission.assignment_id)).all())


def _check_window(session: Session, user: User, assignment: Assignment, now: datetime) -> None:
    """Enforce the assignment's ``rate_limit_count`` submissions per ``rate_limit_seconds``."""
    count, seconds = assignment.rate_limit_count, assignment.rate_limit_seconds
    if not count or not seconds:
        return
    since = now - timedelta(seconds=seconds)
    recent = session.scalars(
        select(Submission.created_at)
        .where(Submission.user_id == user.id, Submission.assignment_id == assignment.id,
               Submission.created_at > since)
        .order_by(Submission.created_at.desc()).limit(count)).all()
    if len(recent) >= count:
        oldest = recent[-1]
        wait = max(1, math.ceil((oldest + timedelta(seconds=seconds) - now).total_seconds()))
        raise SubmissionRejected(
            gettext("rate limited: at most %(count)s submissions per %(window)s for %(slug)s; "
                    "try again in %(wait)s", count=count, window=grader_text(wait_phrase(seconds)),
                    slug=assignment.slug, wait=grader_text(wait_phrase(wait))), 429, retry_after=wait)


def _check_defines_function(text: str, assignment: Assignment, filename: str) -> None:
    """Refuse, before anything is counted, a file that surely does not define the function the
    task grades (an sdpa file sent to mha): it could only score 0 and cost an attempt. A file
    that does not parse is graded, so that its syntax error is explained."""
    from grader import bounded
    from grader.tasks import TITLES

    function = TITLES.get(assignment.task_id, ("", ""))[1]
    if not function:
        return
    # One limited process reads the file for every task's function (grader/bounded.py): a file
    # built to make the parser or the walk blow up costs that process, not the web worker.
    defined = bounded.defined(text, sorted({function} | {name for _, name in TITLES.values() if name}))
    if defined[function] is not False:
        return
    message = gettext("%(file)s does not define %(function)s(), the function task %(slug)s grades; "
                      "nothing was submitted and no attempt was counted",
                      file=filename, function=function, slug=assignment.slug)
    other = next((task for task, (_, other) in TITLES.items()
                  if task != assignment.task_id and defined.get(other)), None)
    if other:
        message += " " + gettext("(it defines %(other)s(), the function of task %(task)s: is that the task "
                                 "you meant?)", other=TITLES[other][1], task=other)
    raise SubmissionRejected(message, 422)


def submit(session: Session, user: User, assignment: Assignment, code: str | bytes, *,
           filename: str = "submission.py", dispatcher=None, max_bytes: int = DEFAULT_MAX_BYTES,
           max_attempts: int = 3, now: datetime | None = None, require_function: bool = False) -> Submission:
    """Accept ``code`` from ``user`` for ``assignment``: commit it with its job, then notify.

    Raises ``SubmissionRejected`` (status 400/403/404/413/429) with a message for the user.
    ``max_attempts`` is the job's infrastructure retry budget, not the student's attempts.
    ``require_function`` refuses (422) a file that surely does not define the task's function,
    before it counts as an attempt: the grader's rule, so the service applies it when it grades
    with the grader (``submit_code``), not with another ``GRADE_FUNCTION``.
    """
    now = now or utcnow()
    if is_notebook(filename):
        code = notebook_code(code, max_bytes)
    text = decode_source(code, max_bytes)
    if assignment.kind != "task":
        raise SubmissionRejected(gettext("%(slug)s is a quiz; answer it on the quiz page",
                                         slug=assignment.slug))
    staff = user.is_instructor
    if not staff and not assignment.visible:
        raise SubmissionRejected(gettext("unknown task %(slug)s", slug=repr(assignment.slug)), 404)
    if require_function:
        _check_defines_function(text, assignment, filename)
    if not staff and assignment.opens_at and now < assignment.opens_at:
        raise SubmissionRejected(
            gettext("%(slug)s opens at %(when)s", slug=assignment.slug,
                    when=iso(assignment.opens_at)), 403)
    if not staff:  # from here to the commit, this student's other submissions wait
        lock_student(session, user)
    limits = limits_for(session, user, assignment)  # the student's own, with an extension
    late = bool(limits.deadline and now > limits.deadline)
    if late and not staff and assignment.late_policy == "reject":
        raise SubmissionRejected(
            gettext("the deadline for %(slug)s passed at %(when)s", slug=assignment.slug,
                    when=iso(limits.deadline)), 403)
    if not staff and limits.max_attempts is not None:
        used = attempts_used(session, user, assignment)
        if used >= limits.max_attempts:
            raise SubmissionRejected(
                gettext("no attempts left: %(used)s of %(allowed)s used for %(slug)s", used=used,
                        allowed=limits.max_attempts, slug=assignment.slug), 403)
    if not staff:
        _check_window(session, user, assignment, now)

    submission = Submission(
        assignment=assignment, user=user, task_id=assignment.task_id, code=text,
        code_sha256=hashlib.sha256(text.encode()).hexdigest(), filename=filename[:200],
        created_at=now, late=late, status=JobStatus.QUEUED)
    job = GradingJob(submission=submission, queue=assignment.queue, status=JobStatus.QUEUED,
                     max_attempts=max_attempts, queued_at=now, notified_at=now)
    session.add_all([submission, job])
    session.commit()  # the truth first ...
    log.info("accepted submission %s for %s (job %s, %s queue)", submission.id, assignment.slug,
             job.id, job.queue, extra={"submission_id": submission.id, "job_id": job.id,
                                       "user_id": user.id, "queue": job.queue})
    if dispatcher is not None:
        try:
            dispatcher.notify([(job.id, job.queue)])  # ... then the delivery
        except Exception:  # the reconciler re-notifies queued jobs; never lose the submission
            log.exception("could not notify workers of job %s; the reconciler will", job.id)
    return submission


def may_see(viewer: User, owner_id: int) -> bool:
    """Whether ``viewer`` may see a submission of user ``owner_id``: their own, or any for
    instructors."""
    return owner_id == viewer.id or viewer.is_instructor


def get_submission(session: Session, viewer: User, submission_id: int) -> Submission | None:
    """The submission if ``viewer`` may see it (``may_see``)."""
    submission = session.get(Submission, submission_id)
    if submission is None or not may_see(viewer, submission.user_id):
        return None
    return submission


# What ``submission_view`` reads besides the row (its job, assignment and results), loaded
# with it in one statement instead of one lazy load each; the newest result's checks follow.
VIEW_LOAD = (joinedload(Submission.job), joinedload(Submission.assignment),
             joinedload(Submission.results))


def load_for_view(session: Session, submission_id: int) -> Submission | None:
    """The submission as it is now in the database, with what ``submission_view`` reads."""
    return session.get(Submission, submission_id, options=VIEW_LOAD, populate_existing=True)


def list_submissions(session: Session, user: User, assignment: Assignment | None = None,
                     limit: int = 50) -> list[Submission]:
    query = select(Submission).where(Submission.user_id == user.id)
    if assignment is not None:
        query = query.where(Submission.assignment_id == assignment.id)
    return list(session.scalars(query.order_by(Submission.id.desc()).limit(limit)))


def feedback_visible(submission: Submission, viewer: User, now: datetime | None = None) -> bool:
    """Whether ``viewer`` may see per-check feedback (else only the score)."""
    assignment = submission.assignment
    if viewer.is_instructor or assignment.feedback == "full":
        return True
    if assignment.feedback == "after_deadline":
        return bool(assignment.deadline and (now or utcnow()) > assignment.deadline)
    return False


def iso(moment: datetime | None) -> str | None:
    return moment.isoformat(timespec="seconds") + "Z" if moment else None


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    return round((end - start).total_seconds(), 3) if start and end else None


def submission_view(submission: Submission, viewer: User, now: datetime | None = None) -> dict:
    """The JSON shape of a submission for ``viewer`` (the API's and the pages' source)."""
    result, job = submission.result, submission.job
    show_checks = feedback_visible(submission, viewer, now)
    checks = []
    report = result.report if result is not None and isinstance(result.report, dict) else {}
    if result is not None and show_checks:
        # the message's template and arguments (grader/i18n.py), to show it in the reader's language
        templates = [c.get("message_i18n") if isinstance(c, dict) else None for c in report.get("checks") or []]
        checks = [{"id": c.check_id, "passed": c.passed, "points": c.points,
                   "max_points": c.max_points, "message": c.message, "details": c.details,
                   **({"message_i18n": templates[c.position]}
                      if c.position < len(templates) and templates[c.position] else {})}
                  for c in result.checks]
    error = submission.error
    if job is not None and job.status == "failed":
        error = error or job.error
    checks, error, notebook = notebook_view(submission, checks, error)
    # families whose findings this student reads only after their deadline (instructor's setting)
    hidden = hidden_checks.hidden_for(submission, viewer, now) if show_checks else set()
    checks, said, said_i18n = hidden_checks.hide(checks, report, hidden)
    assignment = submission.assignment
    scoring = None
    if result is not None and report.get("score") is not None:
        penalty = assignment.late_penalty if submission.late and assignment.late_policy == "penalty" else 0.0
        scoring = {"grader_score": result.score, "max_score": result.max_score,
                   "late_penalty": penalty, "score": submission.score,
                   "family_points": assignment.family_points}
    shown = report if show_checks else {}
    # What the student's code printed (the grader keeps the last 4000 characters of each).
    output = {stream: (shown.get(f"student_{stream}") or "")[-OUTPUT_SHOWN:]
              for stream in ("stdout", "stderr")}
    return {
        "id": submission.id, "public_id": submission.public_id, "task": submission.task_id,
        "assignment": submission.assignment.slug, "status": submission.status,
        "score": submission.score, "max_score": submission.max_score,
        "passed": result.passed if result else None,
        "checks": checks, "feedback": "full" if show_checks else "hidden",
        "error": error, "late": submission.late, "filename": submission.filename,
        "notebook": notebook, "output": output,
        # how the score was reached: one line of root causes, and the late penalty if any
        "summary": said if show_checks else None,
        "summary_i18n": said_i18n if show_checks else None,
        "hidden_families": sorted(hidden),
        "error_i18n": report.get("error_i18n") if error and error == report.get("error") else None,
        "scoring": scoring,
        "grader_version": submission.grader_version,
        "torch_version": result.report.get("torch_version") if result else None,
        "submitted_at": iso(submission.created_at),
        "timings": {
            "queued_at": iso(job.queued_at if job else None),
            "started_at": iso(job.started_at if job else None),
            "finished_at": iso(job.finished_at if job else None),
            "wait_seconds": _seconds(job.queued_at, job.started_at) if job else None,
            "grading_seconds": _seconds(job.started_at, job.finished_at) if job else None,
            "total_seconds": _seconds(job.queued_at, job.finished_at) if job else None,
            "attempts": job.attempts if job else None,
            "grader": (result.report.get("timings") if result and show_checks else None),
        },
    }
