"""Fixtures for the page tests: an app with pages on a fresh database, signed-in clients,
and a worker that grades queued submissions in this process."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
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


_TEMPLATE: dict = {}


def _template_database() -> tuple[Path, dict]:
    """A migrated, seeded SQLite file made once per test process; tests get copies.

    Seeding hashes three passwords and loads the question bank, which is most of a test's
    setup time otherwise.
    """
    if not _TEMPLATE:
        from web.db import dispose_engines, get_engine

        folder = Path(tempfile.mkdtemp(prefix="attn-pages-template-"))
        url = f"sqlite:///{folder / 'template.db'}"
        migrate(url)
        people = seed_people(get_engine(url))
        from web.lti.keys import ensure_signing_key
        ensure_signing_key(get_engine(url))  # what the first app start leaves (an RSA key: 40 ms)
        dispose_engines()  # closes the connections, so the WAL is folded into the file
        _TEMPLATE.update(path=folder / "template.db", people=people)
    return _TEMPLATE["path"], _TEMPLATE["people"]


def make_env(tmp_path, **overrides):
    from web import create_app
    from web.db import get_engine

    template, people = _template_database()
    config = make_config(tmp_path, **{"PAGES": True, "WTF_CSRF_ENABLED": False, **overrides})
    shutil.copyfile(template, tmp_path / "grader.db")
    assert config["DATABASE_URL"] == f"sqlite:///{tmp_path / 'grader.db'}"
    engine = get_engine(config["DATABASE_URL"])
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
