"""The tool's signing key is made when the app starts, so no page writes it (seen in CI: the
LTI settings page answered 503 "database is locked" while grading workers wrote: its
transaction had read, and SQLite refuses to turn that into a write once another process wrote)."""
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
