"""Session hooks that queue grade passback whenever a score changes, whatever changed it.

Grading (``web.dispatch.claim.finish``), regrades, an instructor's override and a submitted
quiz attempt all change ``Submission.score`` or ``QuizAttempt.score``. After each flush the
changed (user, assignment) pairs are noted; just before the transaction commits, their best
scores go to the passback outbox in the same transaction (``passback.queue_best_score``).

A quiz attempt's score is totalled while it is still open (after every graded answer), so
submitting it often leaves ``score`` as it was: the attempt's ``status`` turning
"submitted" is what makes its score count, and is itself a score change.
"""
from __future__ import annotations

from sqlalchemy import event, inspect
from sqlalchemy.orm import Session

from ..models import QuizAttempt, Submission

_KEY = "lti_best_score_changed"


_SCORE_ATTRS = {Submission: ("score", "max_score"),
                QuizAttempt: ("score", "max_score", "status")}


def _score_changed(obj) -> bool:
    state = inspect(obj)
    if state.pending:
        return obj.score is not None
    return any(state.attrs[name].history.has_changes() for name in _SCORE_ATTRS[type(obj)])


@event.listens_for(Session, "after_flush")
def _note_changed_scores(session: Session, _context) -> None:
    for obj in list(session.new) + list(session.dirty):
        if isinstance(obj, Submission) or (isinstance(obj, QuizAttempt)
                                           and obj.status == "submitted"):
            if obj.user_id is not None and obj.assignment_id is not None \
                    and _score_changed(obj):
                session.info.setdefault(_KEY, set()).add((obj.user_id, obj.assignment_id))


@event.listens_for(Session, "before_commit")
def _queue_passback(session: Session) -> None:
    from .passback import queue_best_score

    session.flush()  # so that this transaction's last changes are noted too
    pairs = session.info.pop(_KEY, set())
    for user_id, assignment_id in sorted(pairs):
        queue_best_score(session, user_id, assignment_id)


@event.listens_for(Session, "after_rollback")
def _forget(session: Session) -> None:
    session.info.pop(_KEY, None)
