"""Holding a request until a submission's status changes, so a result reaches the student
as soon as it is stored (long polling) instead of at the client's next poll."""
from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..models import Submission, User
from .submissions import load_for_view, may_see

FINAL = ("done", "failed")
MAX_WAIT_SECONDS = 60.0  # longer than this and proxies start closing idle connections


def wait_seconds(raw: str | None) -> float:
    """The ``wait`` parameter as seconds in [0, MAX_WAIT_SECONDS]; ValueError if not a number."""
    if raw is None or raw == "":
        return 0.0
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"wait={raw!r}: expected a number of seconds "
                         f"(0 to {MAX_WAIT_SECONDS:g})") from None
    if value != value or value < 0:
        raise ValueError(f"wait={raw!r}: expected a number of seconds (0 to {MAX_WAIT_SECONDS:g})")
    return min(value, MAX_WAIT_SECONDS)


def wait_for_change(session: Session, viewer: User, submission_id: int, waiters, *,
                    timeout: float, seen: str | None = None) -> Submission | None:
    """The submission once it is graded (or failed), or once its status is no longer
    ``seen``; after ``timeout`` seconds as it is then. None if ``viewer`` may not see it.

    Between looks the request holds no database connection: each look is its own short
    read of the status alone, and the worker's wake-up (``web.dispatch.wakeup``) triggers
    the next. The row, with what ``submission_view`` reads, is loaded once, at the end.
    """
    first = session.execute(select(Submission.user_id, Submission.status)
                            .where(Submission.id == submission_id)).first()
    if first is None or not may_see(viewer, first.user_id):
        return None

    def wanted(status: str) -> bool:
        return status in FINAL or (seen is not None and status != seen)

    def changed() -> bool:
        status = session.scalar(select(Submission.status).where(Submission.id == submission_id))
        if wanted(status):
            return True  # the row is loaded next, in this same read
        session.commit()  # ends the read: no connection (or SQLite snapshot) held while waiting
        return False

    if timeout > 0 and not wanted(first.status):
        session.commit()
        waiters.wait(submission_id, changed, timeout, wants=wanted)
    return load_for_view(session, submission_id)
