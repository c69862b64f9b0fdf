"""LTI on SQLite beside grading workers that write. SQLite will not turn a transaction that has
read into a writing one once another process has written since ("database is locked", at once):
seen in CI on the LTI settings page, whose GET wrote the first signing key. The key is now made
when the app starts, and the views that write on a GET take the write lock at BEGIN."""
from __future__ import annotations

from sqlalchemy.orm import Session


def test_an_app_starts_with_one_signing_key_and_a_second_start_adds_none(tmp_path):
    from service_support import make_config, migrate
    from web import create_app
    from web.db import dispose_engines, get_engine
    from web.lti.models import LtiKey

    config = make_config(tmp_path, PAGES=True)
    migrate(config["DATABASE_URL"])
    engine = get_engine(config["DATABASE_URL"])
    try:
        with Session(bind=engine) as session:
            assert session.query(LtiKey).count() == 0
        create_app(config)
        create_app(config)
        with Session(bind=engine) as session:
            assert [k.active for k in session.query(LtiKey)] == [True]
    finally:
        dispose_engines()


def test_the_lti_page_writes_nothing_while_a_worker_writes(tmp_path):
    """The page's read transaction starts, a worker commits, the page finishes: no write
    from the page, so nothing to refuse."""
    from pages_support import make_env, sign_in
    from web.db import dispose_engines
    from web.extensions import db_session
    from web.models import Course

    env = make_env(tmp_path)
    try:
        @env.app.before_request
        def _a_worker_writes_after_the_page_read():
            from flask import request
            if request.path == "/instructor/lti":
                db_session().query(Course).all()  # the page's snapshot
                with Session(bind=env.engine) as worker:
                    worker.add(Course(slug="elsewhere", title="Another course"))
                    worker.commit()

        client = env.app.test_client()
        assert sign_in(client, "prof@example.org").status_code == 302
        response = client.get("/instructor/lti")
        assert response.status_code == 200, response.text[:300]
        assert "/lti/jwks" in response.text
    finally:
        dispose_engines()


def test_the_lms_login_and_registration_take_the_write_lock_even_on_a_get(tmp_path):
    """They write on a GET (the login's state and nonce, the registered platform): on SQLite their
    transaction takes the write lock at BEGIN, as a POST's does, and waits for a worker's write
    instead of failing once the worker has written since it read."""
    from pages_support import make_env
    from web.db import dispose_engines
    from web.extensions import db_session

    env = make_env(tmp_path)
    try:
        for path, immediate in (("/lti/login", True), ("/lti/register/a-token", True), ("/lti/jwks", False),
                                ("/instructor/lti", False), ("/", False)):
            with env.app.test_request_context(path, method="GET"):
                options = db_session().get_bind().get_execution_options()
                assert options.get("sqlite_immediate", False) is immediate, path
        with env.app.test_request_context("/instructor/lti", method="POST"):
            assert db_session().get_bind().get_execution_options().get("sqlite_immediate")
    finally:
        dispose_engines()
