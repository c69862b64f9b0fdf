"""An assignment's limits hold when one student sends many requests at once.

Twenty requests from one student, released together by a barrier, against a limit of three:
exactly three are accepted, through the JSON API, the web form (also for an account an LMS
launch created) and quiz attempts and answers, on SQLite and on PostgreSQL. Each limit is a
count followed by an insert; without the per-student lock (``lock_student``) concurrent
requests all read the old count (5 to 13 of 20 were accepted on PostgreSQL).
"""
from __future__ import annotations

import threading

import pytest
from sqlalchemy import func, select

from web import create_app
from web.db import session_factory
from web.models import Assignment, QuizAttempt, QuizTry, Submission, User

FIRE, LIMIT = 20, 3


@pytest.fixture
def app(service):
    app = create_app({**service.config, "PAGES": True, "WTF_CSRF_ENABLED": False})
    app.service = service
    return app


def _at_once(send) -> list:
    """``send(i)`` from FIRE threads released together; their answers in order."""
    barrier = threading.Barrier(FIRE)
    answers: list = [None] * FIRE

    def one(i):
        barrier.wait()
        answers[i] = send(i)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(FIRE)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return answers


def _set(app, slug, **fields):
    with session_factory(app.service.engine)() as session:
        assignment = session.scalar(select(Assignment).where(Assignment.slug == slug))
        for name, value in fields.items():
            setattr(assignment, name, value)
        session.commit()


def _signed_in(app, user_id: int):
    """A browser signed in as ``user_id`` (as after the sign-in form or an LTI launch)."""
    client = app.test_client()
    with client.session_transaction() as browser:
        browser["_user_id"], browser["_fresh"] = str(user_id), True
    return client


def _count(app, model, **where):
    with session_factory(app.service.engine)() as session:
        query = select(func.count()).select_from(model)
        for name, value in where.items():
            query = query.where(getattr(model, name) == value)
        return session.scalar(query)


def _api_fire(app, who):
    token = app.service.people[who]["token"]
    clients = [app.test_client() for _ in range(FIRE)]
    return [r.status_code for r in _at_once(lambda i: clients[i].post(
        "/api/v1/submissions", json={"task": "sdpa", "code": f"# SCORE={i % 10}\n"},
        headers={"Authorization": f"Bearer {token}"}))]


def _form_fire(app, user_id):
    clients = [_signed_in(app, user_id) for _ in range(FIRE)]
    answers = _at_once(lambda i: clients[i].post(
        "/tasks/sdpa", data={"code": f"# SCORE={i % 10}\n"}))
    return [r.status_code for r in answers]  # 302 to the submission, or 200 with the refusal


@pytest.mark.parametrize("limit", ["max_attempts", "rate_limit"])
def test_twenty_submissions_at_once_meet_a_limit_of_three_exactly(app, limit):
    if limit == "max_attempts":
        _set(app, "sdpa", max_attempts=LIMIT)
        refused = 403
    else:
        _set(app, "sdpa", rate_limit_count=LIMIT, rate_limit_seconds=3600)
        refused = 429
    people = app.service.people

    codes = _api_fire(app, "ada")
    assert sorted(codes) == [202] * LIMIT + [refused] * (FIRE - LIMIT)
    assert _count(app, Submission, user_id=people["ada"]["id"]) == LIMIT

    if limit == "rate_limit":  # the same check, after the same lock, whatever the path
        return
    codes = _form_fire(app, people["bob"]["id"])
    assert sorted(codes) == [200] * (FIRE - LIMIT) + [302] * LIMIT
    assert _count(app, Submission, user_id=people["bob"]["id"]) == LIMIT

    # an account made by an LMS launch submits through the form
    from web.lti.models import LtiPlatform
    from web.lti.provision import launch_user

    with session_factory(app.service.engine)() as session:
        platform = LtiPlatform(name="LMS", issuer="https://lms.example", client_id="c1",
                               auth_login_url="https://lms.example/auth",
                               auth_token_url="https://lms.example/token",
                               key_set_url="https://lms.example/jwks", deployment_ids=["1"])
        session.add(platform)
        session.flush()
        user, *_ = launch_user(session, platform, {
            "sub": "lms-student-7", "email": "carol@lms.example",
            "https://purl.imsglobal.org/spec/lti/claim/roles": [
                "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"]})
        session.commit()
        lti_id = user.id
    assert sorted(_form_fire(app, lti_id)) == [200] * (FIRE - LIMIT) + [302] * LIMIT
    assert _count(app, Submission, user_id=lti_id) == LIMIT


def test_twenty_quiz_starts_and_answers_at_once_meet_the_quiz_limits(app):
    from web.config import quiz_secret
    from web.services import quizzes

    _set(app, "quiz", max_attempts=LIMIT, answer_policy="single_try")
    ada = app.service.people["ada"]["id"]
    with session_factory(app.service.engine)() as session:  # two attempts used already
        student, quiz = session.get(User, ada), session.scalar(
            select(Assignment).where(Assignment.slug == "quiz"))
        for _ in range(LIMIT - 1):
            quizzes.submit_attempt(session, quizzes.start_attempt(
                session, student, quiz, secret=quiz_secret(app.config)))
        session.commit()
    clients = [_signed_in(app, ada) for _ in range(FIRE)]
    for last in (True, False):
        codes = _at_once(lambda i: clients[i].post("/quiz/quiz/start").status_code)
        assert codes == [302] * FIRE
        # the third and last attempt is started once, by one of the twenty; then none
        assert _count(app, QuizAttempt, user_id=ada) == LIMIT
        assert _count(app, QuizAttempt, user_id=ada, status="open") == int(last)
        if last:  # one try per question: twenty answers at once store one
            _at_once(lambda i: clients[i].post("/quiz/quiz/questions/head-dimension",
                                               data={"q-head-dimension-number": str(i)}))
            assert _count(app, QuizTry) == 1
            clients[0].post("/quiz/quiz/submit", data={"confirmed": "yes"})
