"""A student's standing: each assignment's status, best score and attempts left."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from flask_babel import gettext
from sqlalchemy import select
from sqlalchemy.orm import Session

from ..models import Assignment, QuizAttempt, Submission, User, utcnow
from .courses import default_course
from .extensions import limits_for


@dataclass
class AssignmentStanding:
    assignment: Assignment
    status: str               # not started | queued | running | graded | failed | in progress | submitted | awaiting review
    best_score: float | None
    max_score: float | None
    attempts_used: int
    attempts_left: int | None  # None = unlimited
    is_open: bool             # the student may submit now
    closed_reason: str = ""
    latest_id: int | None = None  # latest submission (task) or attempt (quiz)
    deadline: datetime | None = None  # the student's own (an extension moves it)
    extended: bool = False
    late: bool = False  # open, but its deadline has passed: what is sent now is late work


def submission_window(assignment: Assignment, now: datetime,
                      deadline: datetime | None = None) -> tuple[bool, str]:
    """Whether a student may submit now, and why not (``deadline``: the student's own)."""
    deadline = deadline or assignment.deadline
    if assignment.opens_at and now < assignment.opens_at:
        return False, gettext("opens %(when)s UTC", when=assignment.opens_at.strftime("%Y-%m-%d %H:%M"))
    if deadline and now > deadline and assignment.late_policy == "reject":
        return False, gettext("the deadline has passed")
    return True, ""


def _task_standing(session: Session, user: User, assignment: Assignment, now) -> AssignmentStanding:
    subs = list(session.scalars(select(Submission).where(
        Submission.user_id == user.id, Submission.assignment_id == assignment.id)
        .order_by(Submission.id)))
    graded = [s for s in subs if s.score is not None]
    best = max(graded, key=lambda s: s.score) if graded else None
    latest = subs[-1] if subs else None
    status = "not started"
    if latest is not None:
        status = {"done": "graded"}.get(latest.status, latest.status)
    return _standing(assignment, status, best.score if best else None,
                     best.max_score if best else None, len(subs), now,
                     latest.id if latest else None, limits_for(session, user, assignment))


def _quiz_standing(session: Session, user: User, assignment: Assignment, now) -> AssignmentStanding:
    attempts = list(session.scalars(select(QuizAttempt).where(
        QuizAttempt.user_id == user.id, QuizAttempt.assignment_id == assignment.id)
        .order_by(QuizAttempt.id)))
    submitted = [a for a in attempts if a.status == "submitted"]
    best = max(submitted, key=lambda a: a.score or 0.0) if submitted else None
    latest = attempts[-1] if attempts else None
    status = "not started"
    if latest is not None and latest.status == "open":
        status = "in progress"
    elif latest is not None:
        status = "awaiting review" if latest.needs_manual else "submitted"
    used = len(submitted) + (1 if latest is not None and latest.status == "open" else 0)
    return _standing(assignment, status, best.score if best else None,
                     best.max_score if best else None, used, now, latest.id if latest else None,
                     limits_for(session, user, assignment))


def _standing(assignment, status, best, top, used, now, latest_id, limits) -> AssignmentStanding:
    left = None if limits.max_attempts is None else max(0, limits.max_attempts - used)
    is_open, reason = submission_window(assignment, now, limits.deadline)
    if is_open and left == 0:
        is_open, reason = False, gettext("no attempts left")
    late = is_open and limits.deadline is not None and now > limits.deadline
    return AssignmentStanding(assignment, status, best, top, used, left, is_open, reason, latest_id,
                              deadline=limits.deadline, extended=limits.extended, late=late)


def standing(session: Session, user: User, assignment: Assignment,
             now: datetime | None = None) -> AssignmentStanding:
    now = now or utcnow()
    if assignment.kind == "quiz":
        return _quiz_standing(session, user, assignment, now)
    return _task_standing(session, user, assignment, now)


def home_rows(session: Session, user: User, now: datetime | None = None) -> list[AssignmentStanding]:
    """Every assignment of the default course the user may see, in course order."""
    course = default_course(session)
    if course is None:
        return []
    return [standing(session, user, a, now) for a in course.assignments
            if a.visible or user.is_instructor]


def history(session: Session, user_id: int, assignment_id: int) -> list[Submission]:
    """A student's submissions for one assignment, newest first."""
    return list(session.scalars(select(Submission).where(
        Submission.user_id == user_id, Submission.assignment_id == assignment_id)
        .order_by(Submission.id.desc())))


def previous_submission(session: Session, submission: Submission) -> Submission | None:
    return session.scalar(select(Submission).where(
        Submission.user_id == submission.user_id,
        Submission.assignment_id == submission.assignment_id,
        Submission.id < submission.id).order_by(Submission.id.desc()).limit(1))


def attempt_numbers(submissions: list[Submission]) -> dict[int, int]:
    """Submission id -> the student's own attempt number (1 for their first)."""
    return {s.id: n for n, s in enumerate(sorted(submissions, key=lambda s: s.id), start=1)}
