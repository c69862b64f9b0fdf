"""Grade passback (LTI AGS): each user's best score goes to every LMS link of the assignment.

The database is the truth, as for grading jobs (``web.dispatch``): a new best score is
written to the ``lti_score_syncs`` outbox in the same transaction as the score itself, so it
cannot be lost, and a sender delivers it later, with retries, from any host.

- ``queue_best_score`` (called by the session hooks in ``web.lti.hooks`` whenever a
  submission's or a quiz attempt's score changes) stores the latest best score per link and
  user, bumps ``version`` and gives it a timestamp later than any sent before, so that even
  a late duplicate can only be an *older* score, which AGS platforms drop by ``timestamp``.
- ``send_due`` claims due rows with a conditional update (a lease and a fencing ``claim``
  counter, like ``GradingJob.attempts``), posts the score, and marks the version sent only
  if it still holds the claim. A failure (LMS down, timeout, 5xx) is retried with
  exponential backoff up to an hour, forever: a score is never given up on. ``serve`` and
  ``attn-grader worker`` run it beside the reconciler; ``attn-grader lti send`` runs it by hand.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from pylti1p3.assignments_grades import AssignmentsGradesService
from pylti1p3.exception import LtiServiceException
from pylti1p3.grade import Grade
from pylti1p3.lineitem import LineItem
from pylti1p3.service_connector import ServiceConnector
from sqlalchemy import and_, or_, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ..db import session_factory, write_session
from ..models import Assignment, QuizAttempt, Submission, utcnow
from .keys import signing_key
from .models import LtiPlatform, LtiResourceLink, LtiScoreSync, LtiUser
from .toolconf import http_session, registration_for

log = logging.getLogger(__name__)
S = LtiScoreSync
SCORE_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
LINEITEM_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
TIMESTAMP_STEP = timedelta(milliseconds=1)  # AGS timestamps carry milliseconds
RETRY_BASE_SECONDS = 10.0
RETRY_MAX_SECONDS = 3600.0


def best_score(session: Session, user_id: int, assignment: Assignment):
    """(score, max score) of the user's best graded submission or submitted attempt."""
    if assignment.kind == "quiz":
        query = (select(QuizAttempt.score, QuizAttempt.max_score)
                 .where(QuizAttempt.user_id == user_id,
                        QuizAttempt.assignment_id == assignment.id,
                        QuizAttempt.status == "submitted", QuizAttempt.score.is_not(None))
                 .order_by(QuizAttempt.score.desc(), QuizAttempt.id.desc()))
    else:
        query = (select(Submission.score, Submission.max_score)
                 .where(Submission.user_id == user_id,
                        Submission.assignment_id == assignment.id,
                        Submission.score.is_not(None), Submission.max_score.is_not(None))
                 .order_by(Submission.score.desc(), Submission.id.desc()))
    row = session.execute(query.limit(1)).first()
    return (float(row[0]), float(row[1] or 0.0)) if row else None


def next_timestamp(previous: datetime | None, now: datetime) -> datetime:
    """``now``, or just after ``previous`` if the clock has not moved past it."""
    now = now.replace(microsecond=now.microsecond // 1000 * 1000)
    return now if previous is None or now > previous else previous + TIMESTAMP_STEP


def queue_best_score(session: Session, user_id: int, assignment_id: int, now=None) -> int:
    """Put the user's current best score in the outbox of each LMS link; returns rows changed."""
    now = now or utcnow()
    links = session.execute(
        select(LtiResourceLink, LtiUser.sub)
        .join(LtiPlatform, LtiPlatform.id == LtiResourceLink.platform_id)
        .join(LtiUser, and_(LtiUser.issuer == LtiPlatform.issuer, LtiUser.user_id == user_id))
        .where(LtiResourceLink.assignment_id == assignment_id)).all()
    changed = 0
    for link, sub in links:
        if not link.ags or SCORE_SCOPE not in (link.ags.get("scope") or []):
            continue  # the platform did not grant score passback for this link
        changed += _upsert(session, link, user_id, sub, now)
    return changed


def _upsert(session: Session, link: LtiResourceLink, user_id: int, sub: str, now) -> int:
    # Lock the row first, then read the best score: a concurrent transaction's newer score
    # is committed (and visible) by the time the lock is ours (PostgreSQL, READ COMMITTED).
    row = session.scalar(select(S).where(S.link_id == link.id, S.user_id == user_id)
                         .with_for_update())
    best = best_score(session, user_id, link.assignment)
    if best is None:
        return 0
    if row is None:
        try:
            with session.begin_nested():
                session.add(S(link_id=link.id, user_id=user_id, lti_sub=sub,
                              score_given=best[0], score_maximum=best[1],
                              score_timestamp=next_timestamp(None, now), version=1,
                              sent_version=0, claim=0, attempts=0, next_attempt_at=now))
            return 1
        except IntegrityError:  # another transaction inserted it first: update that row
            row = session.scalar(select(S).where(S.link_id == link.id, S.user_id == user_id)
                                 .with_for_update())
    if (row.score_given, row.score_maximum) == best and row.lti_sub == sub:
        return 0
    row.score_given, row.score_maximum, row.lti_sub = best[0], best[1], sub
    row.score_timestamp = next_timestamp(row.score_timestamp, now)
    row.version += 1
    row.next_attempt_at = now
    return 1


# ---- sending -------------------------------------------------------------------------------

@dataclass
class SendReport:
    sent: list[int] = field(default_factory=list)      # outbox row ids delivered
    retrying: list[int] = field(default_factory=list)  # failed now, due again later
    errors: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Claimed:
    id: int
    claim: int
    version: int
    link_id: int
    lti_sub: str
    score_given: float
    score_maximum: float
    score_timestamp: datetime


def _due(now):
    free = or_(S.lease_until.is_(None), S.lease_until < now)
    return and_(S.version > S.sent_version, S.next_attempt_at <= now, free)


def _claim(engine: Engine, row_id: int, lease_seconds: float, now) -> _Claimed | None:
    with write_session(engine) as session:
        got = session.execute(
            update(S).where(S.id == row_id, _due(now))
            .values(claim=S.claim + 1, lease_until=now + timedelta(seconds=lease_seconds))
            .returning(S.id, S.claim, S.version, S.link_id, S.lti_sub, S.score_given,
                       S.score_maximum, S.score_timestamp)).first()
    return _Claimed(*got) if got else None


def backoff_seconds(attempts: int) -> float:
    return min(RETRY_MAX_SECONDS, RETRY_BASE_SECONDS * 2 ** max(0, attempts - 1))


def iso_timestamp(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds") + "Z"


def grade_for(item: _Claimed) -> Grade:
    return (Grade().set_score_given(item.score_given).set_score_maximum(item.score_maximum)
            .set_timestamp(iso_timestamp(item.score_timestamp))
            .set_activity_progress("Completed").set_grading_progress("FullyGraded")
            .set_user_id(item.lti_sub))


class _Connectors:
    """One service connector (and access token) per platform for a sending round."""

    def __init__(self, session: Session):
        self.session, self.http, self._by_platform = session, http_session(), {}

    def for_link(self, link: LtiResourceLink) -> ServiceConnector:
        if link.platform_id not in self._by_platform:
            registration = registration_for(link.platform, signing_key(self.session))
            self._by_platform[link.platform_id] = ServiceConnector(registration, self.http)
        return self._by_platform[link.platform_id]


def _deliver(session: Session, connectors: _Connectors, item: _Claimed) -> None:
    link = session.get(LtiResourceLink, item.link_id)
    ags = dict(link.ags or {})
    service = AssignmentsGradesService(connectors.for_link(link), ags)
    if not ags.get("lineitem"):  # no line item of its own: find or create one for this link
        if LINEITEM_SCOPE not in (ags.get("scope") or []) or not ags.get("lineitems"):
            raise LookupError("the LMS gave this link no line item and no right to create "
                              "one (AGS lineitem scope); enable grades for the tool in the LMS")
        lineitem = service.find_or_create_lineitem(
            LineItem().set_label(link.assignment.title).set_score_maximum(item.score_maximum)
            .set_resource_id(link.assignment.slug).set_resource_link_id(link.resource_link_id)
            .set_tag(f"attn-grader:{link.assignment.slug}"), find_by="resource_link_id")
        ags["lineitem"] = lineitem.get_id()
        link.ags = ags
        session.commit()
    try:
        service.put_grade(grade_for(item))
    except LtiServiceException as exc:
        if exc.response.status_code == 409:  # AGS: the platform holds a newer score already
            log.info("passback %s: platform kept a newer score (409)", item.id)
            return
        raise


def send_due(engine: Engine, *, lease_seconds: float = 60.0, limit: int = 100,
             now=None) -> SendReport:
    """Deliver every due outbox row (up to ``limit``); safe to run on many hosts at once."""
    report = SendReport()
    now = now or utcnow()
    with session_factory(engine)() as session:
        ids = list(session.scalars(select(S.id).where(_due(now))
                                   .order_by(S.next_attempt_at, S.id).limit(limit)))
    if not ids:
        return report
    with session_factory(engine)() as session:
        connectors = _Connectors(session)
        for row_id in ids:
            item = _claim(engine, row_id, lease_seconds, now)
            if item is None:
                continue  # another sender has it, or it was sent meanwhile
            try:
                _deliver(session, connectors, item)
            except Exception as exc:  # the LMS is down or refused: retry later, never drop
                session.rollback()
                _failed(engine, item, f"{type(exc).__name__}: {exc}"[:2000])
                report.retrying.append(item.id)
                report.errors[item.id] = str(exc)
                log.warning("passback %s (version %s) failed: %s", item.id, item.version, exc)
            else:
                _sent(engine, item)
                report.sent.append(item.id)
    return report


def _sent(engine: Engine, item: _Claimed) -> None:
    now = utcnow()
    with write_session(engine) as session:
        # Fenced by the claim: no later sender has touched the row, so no later version
        # can have been sent meanwhile.
        session.execute(update(S).where(S.id == item.id, S.claim == item.claim)
                        .values(sent_version=item.version, sent_at=now, lease_until=None,
                                attempts=0, last_error=None))


def _failed(engine: Engine, item: _Claimed, error: str) -> None:
    now = utcnow()
    with write_session(engine) as session:
        row = session.get(S, item.id)
        if row is None or row.claim != item.claim:
            return  # someone else holds it now
        row.attempts += 1
        row.lease_until = None
        row.last_error = error
        row.next_attempt_at = now + timedelta(seconds=backoff_seconds(row.attempts))


def outbox(session: Session, pending_only: bool = False) -> list[LtiScoreSync]:
    query = select(S).order_by(S.next_attempt_at, S.id)
    if pending_only:
        query = query.where(S.version > S.sent_version)
    return list(session.scalars(query))
