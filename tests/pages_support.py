"""Fixtures for the page tests: an app with pages on a fresh database, signed-in clients,
and a worker that grades queued submissions in this process."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from service_support import fake_grade, make_config, migrate, seed_people

PASSWORD = "correct horse"  # seed_people's


def sign_in(client, email: str, password: str = PASSWORD):
    return client.post("/sign-in", data={"email": email, "password": password})


def grade_queued(env, grade_fn=fake_grade) -> int:
    """Grade every queued job with ``grade_fn``; returns how many were graded."""
    from web.dispatch.worker import GradingWorker

    worker = GradingWorker(env.engine, env.config, grade_fn=grade_fn, name="test-worker")
    count = 0
    while worker.run_once(("cpu",)) is not None:
        count += 1
    return count


def make_env(tmp_path, **overrides):
    from web import create_app
    from web.db import get_engine

    config = make_config(tmp_path, **{"PAGES": True, "WTF_CSRF_ENABLED": False, **overrides})
    migrate(config["DATABASE_URL"])
    engine = get_engine(config["DATABASE_URL"])
    people = seed_people(engine)
    app = create_app(config)
    return SimpleNamespace(app=app, config=config, engine=engine, people=people, tmp_path=tmp_path)


@pytest.fixture
def env(tmp_path):
    from web.db import dispose_engines

    yield make_env(tmp_path)
    dispose_engines()


@pytest.fixture
def ada(env):
    client = env.app.test_client()
    assert sign_in(client, "ada@example.org").status_code == 302
    return client


@pytest.fixture
def bob(env):
    client = env.app.test_client()
    assert sign_in(client, "bob@example.org").status_code == 302
    return client


@pytest.fixture
def prof(env):
    client = env.app.test_client()
    assert sign_in(client, "prof@example.org").status_code == 302
    return client


def db_session(env):
    from web.db import session_factory

    return session_factory(env.engine)()
