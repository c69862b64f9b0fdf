"""Session hooks that queue grade passback whenever a score changes, whatever changed it.

Grading (``web.dispatch.claim.finish``), regrades, an instructor's override and a submitted
quiz attempt all change ``Submission.score`` or ``QuizAttempt.score``. After each flush the
changed (user, assignment) pairs are noted; just before the transaction commits, their best
scores go to the passback outbox in the same transaction (``passback.queue_best_score``).

A quiz attempt's score is totalled while it is still open (after every graded answer), so
submitting it often leaves ``score`` as it was: the attempt's ``status`` turning
"submitted" is what makes its score count, and is itself a score change.

The hooks act on the sessions of the databases given to ``install`` (by ``web.lti.init_app``
for the app, ``init_engine`` for a grading worker), and on no other session of the process.
"""
from __future__ import annotations

import threading

from sqlalchemy import event, inspect
from sqlalchemy.orm import Session

from ..models import QuizAttempt, Submission

_KEY = "lti_best_score_changed"
_databases: set[str] = set()  # the URLs whose sessions queue passback
_lock = threading.Lock()


def install(engine) -> None:
    """Queue passback from the sessions on ``engine``'s database (idempotent)."""
    with _lock:
        _databases.add(_url(engine))
        if not event.contains(Session, "after_flush", _note_changed_scores):
            event.listen(Session, "after_flush", _note_changed_scores)
            event.listen(Session, "before_commit", _queue_passback)
            event.listen(Session, "after_rollback", _forget)


def _url(bind) -> str:
    return bind.url.render_as_string(hide_password=False)


def _ours(session: Session) -> bool:
    return session.bind is not None and _url(session.bind) in _databases


_SCORE_ATTRS = {Submission: ("score", "max_score"),
                QuizAttempt: ("score", "max_score", "status")}


def _score_changed(obj) -> bool:
    state = inspect(obj)
    if state.pending:
        return obj.score is not None
    return any(state.attrs[name].history.has_changes() for name in _SCORE_ATTRS[type(obj)])


def _note_changed_scores(session: Session, _context) -> None:
    if not _ours(session):
        return
    for obj in list(session.new) + list(session.dirty):
        if isinstance(obj, Submission) or (isinstance(obj, QuizAttempt)
                                           and obj.status == "submitted"):
            if obj.user_id is not None and obj.assignment_id is not None \
                    and _score_changed(obj):
                session.info.setdefault(_KEY, set()).add((obj.user_id, obj.assignment_id))


def _queue_passback(session: Session) -> None:
    from .passback import queue_best_score

    if not _ours(session):
        return
    session.flush()  # so that this transaction's last changes are noted too
    pairs = session.info.pop(_KEY, set())
    for user_id, assignment_id in sorted(pairs):
        queue_best_score(session, user_id, assignment_id)


def _forget(session: Session) -> None:
    session.info.pop(_KEY, None)
