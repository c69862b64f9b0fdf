"""The passback outbox's database side on SQLite and PostgreSQL: queued in the grading
transaction, claims fenced like grading jobs, versions and timestamps that only grow."""
from __future__ import annotations

from datetime import datetime, timedelta

from service_support import fake_grade


def _link_ada(service) -> int:
    from web.db import session_factory
    from web.lti.models import LtiResourceLink, LtiUser
    from web.lti.passback import SCORE_SCOPE
    from web.lti.platforms import add_platform
    from web.models import User
    from web.services.courses import find_assignment

    with session_factory(service.engine)() as session:
        platform = add_platform(session, issuer="https://lms.example.edu", client_id="c1",
                                auth_login_url="https://lms.example.edu/auth",
                                auth_token_url="https://lms.example.edu/token",
                                key_set_url="https://lms.example.edu/jwks")
        ada = session.get(User, service.people["ada"]["id"])
        session.add(LtiUser(issuer=platform.issuer, platform=platform, sub="lms-ada", user=ada))
        session.add(LtiResourceLink(platform=platform, resource_link_id="rl-1",
                                    deployment_id="d", assignment=find_assignment(session, "sdpa"),
                                    ags={"scope": [SCORE_SCOPE],
                                         "lineitem": "https://lms.example.edu/li/1"}))
        session.commit()
        return ada.id


def _grade(service, code: str) -> None:
    from web.db import session_factory
    from web.dispatch.worker import GradingWorker
    from web.models import User
    from web.services.courses import find_assignment
    from web.services.submissions import submit

    with session_factory(service.engine)() as session:
        ada = session.get(User, service.people["ada"]["id"])
        submit(session, ada, find_assignment(session, "sdpa"), code)
        session.commit()
    worker = GradingWorker(service.engine, service.config, grade_fn=fake_grade, name="w")
    assert worker.run_once(("cpu",)) == "done"


def _row(service):
    from web.db import session_factory
    from web.lti.models import LtiScoreSync

    with session_factory(service.engine)() as session:
        return session.query(LtiScoreSync).one()


def test_claims_are_fenced_and_a_new_best_score_gets_a_later_timestamp(service):
    from web.lti import passback
    from web.models import utcnow

    _link_ada(service)
    _grade(service, "# SCORE=5\n")
    row = _row(service)
    assert (row.score_given, row.version, row.sent_version, row.lti_sub) == \
        (5.0, 1, 0, "lms-ada")

    now = utcnow()
    first = passback._claim(service.engine, row.id, lease_seconds=1, now=now)
    assert first is not None and first.version == 1
    assert passback._claim(service.engine, row.id, 1, now) is None  # leased to the first
    second = passback._claim(service.engine, row.id, 60, now + timedelta(seconds=5))
    assert second is not None and second.claim == first.claim + 1

    passback._failed(service.engine, first, "timed out")  # the superseded sender: ignored
    passback._sent(service.engine, first)
    assert (_row(service).sent_version, _row(service).last_error) == (0, None)
    passback._sent(service.engine, second)
    assert _row(service).sent_version == 1
    assert passback._claim(service.engine, row.id, 60, now + timedelta(seconds=10)) is None

    _grade(service, "# SCORE=4\n")  # not a new best: nothing to send
    assert _row(service).version == 1
    _grade(service, "# SCORE=8\n")
    newer = _row(service)
    assert (newer.score_given, newer.version, newer.sent_version) == (8.0, 2, 1)
    assert newer.score_timestamp > row.score_timestamp


def test_a_failure_backs_off_and_keeps_the_score(service):
    from web.lti import passback
    from web.models import utcnow

    _link_ada(service)
    _grade(service, "# SCORE=7\n")
    now = utcnow()
    item = passback._claim(service.engine, _row(service).id, 60, now)
    passback._failed(service.engine, item, "ConnectionError: LMS down")
    row = _row(service)
    assert (row.attempts, row.last_error, row.sent_version) == (1, "ConnectionError: LMS down", 0)
    assert row.next_attempt_at >= now + timedelta(seconds=passback.RETRY_BASE_SECONDS - 1)
    assert passback._claim(service.engine, row.id, 60, now) is None  # not due yet
    assert passback._claim(service.engine, row.id, 60, row.next_attempt_at) is not None


def test_timestamps_only_grow_even_when_the_clock_does_not():
    from web.lti.passback import TIMESTAMP_STEP, backoff_seconds, iso_timestamp, next_timestamp

    t0 = datetime(2026, 12, 1, 10, 0, 0, 123456)
    first = next_timestamp(None, t0)
    assert first == datetime(2026, 12, 1, 10, 0, 0, 123000)  # AGS carries milliseconds
    assert next_timestamp(first, t0) == first + TIMESTAMP_STEP
    assert next_timestamp(first, t0 - timedelta(hours=1)) == first + TIMESTAMP_STEP
    assert next_timestamp(first, t0 + timedelta(seconds=1)) > first
    assert iso_timestamp(first) == "2026-12-01T10:00:00.123Z"
    assert [backoff_seconds(n) for n in (1, 2, 3)] == [10.0, 20.0, 40.0]
    assert backoff_seconds(30) == 3600.0
