"""Per-student extensions: one student's own deadline and extra attempts for an assignment.

Every check of a deadline or an attempt limit for a student asks ``limits_for`` rather than
reading the assignment, so an extension moves the submit form, the API, quiz starts and the
standing shown on the home page together.

Each such check is a count followed by an insert (a submission, a quiz attempt, a try), so a
request first takes ``lock_student``: concurrent requests of one student then count one after
another, and twenty submissions sent at once meet a limit of three exactly.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..db import is_sqlite

from ..models import Assignment, Extension, User


@dataclass(frozen=True)
class Limits:
    deadline: datetime | None
    max_attempts: int | None  # None = unlimited
    extended: bool


def lock_student(session: Session, user: User) -> None:
    """Serialise this student's limit checks until the session's transaction ends.

    PostgreSQL: the user's row, ``FOR NO KEY UPDATE`` (it does not block rows that merely
    reference the user, nor other students). SQLite: a request that writes began its
    transaction with ``BEGIN IMMEDIATE`` (``web.extensions.db_session``), which already holds
    the database's one write lock, so there is nothing more to take.
    """
    if user.id is None or is_sqlite(session.get_bind()):
        return
    session.execute(select(User.id).where(User.id == user.id).with_for_update(key_share=True))


def extension_for(session: Session, user: User, assignment: Assignment) -> Extension | None:
    return session.scalar(select(Extension).where(Extension.assignment_id == assignment.id,
                                                  Extension.user_id == user.id))


def limits_for(session: Session, user: User, assignment: Assignment) -> Limits:
    ext = extension_for(session, user, assignment) if user.id is not None else None
    if ext is None:
        return Limits(assignment.deadline, assignment.max_attempts, False)
    top = None if assignment.max_attempts is None else assignment.max_attempts + ext.extra_attempts
    return Limits(ext.deadline or assignment.deadline, top, True)


def grant(session: Session, assignment: Assignment, student: User, *, granted_by: User,
          deadline: datetime | None = None, extra_attempts: int = 0, note: str = "") -> Extension:
    """Give ``student`` their own deadline and/or extra attempts (replacing an earlier grant)."""
    if extra_attempts < 0:
        raise ValueError("extra attempts cannot be negative")
    if deadline is None and not extra_attempts:
        raise ValueError("give a new deadline or extra attempts")
    if assignment.deadline and deadline and deadline < assignment.deadline:
        raise ValueError("an extension cannot end before the assignment's deadline")
    ext = extension_for(session, student, assignment) or Extension(assignment=assignment,
                                                                  user=student)
    ext.deadline, ext.extra_attempts, ext.note = deadline, extra_attempts, note[:200]
    ext.granted_by_id = granted_by.id
    session.add(ext)
    session.flush()
    return ext


def extensions_of(session: Session, assignment: Assignment) -> list[Extension]:
    return list(session.scalars(select(Extension).where(Extension.assignment_id == assignment.id)
                                .order_by(Extension.id)))
