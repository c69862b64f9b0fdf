"""Migration 0010: LTI people keyed by (issuer, sub), the duplicates of earlier registrations
merged into the oldest account with everything they did (review 3, M3). Run on a populated
SQLite file and, where it is reachable, on PostgreSQL."""
from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa

from service_support import _reachable

T0 = datetime(2026, 11, 1, 9, 0)


def _insert(conn, table: str, **values) -> int:
    """A row with ``values``; every other required column gets a plain value of its type."""
    for column in sa.inspect(conn).get_columns(table):
        name, kind = column["name"], column["type"]
        if name in values or column["nullable"] or column.get("default") is not None \
                or column.get("autoincrement") is True or name == "id":
            continue
        values[name] = (T0 if isinstance(kind, sa.DateTime) else
                        False if isinstance(kind, sa.Boolean) else
                        0 if isinstance(kind, (sa.Integer, sa.Float, sa.Numeric)) else
                        "[]" if isinstance(kind, sa.JSON) else "x")
    names = ", ".join(values)
    row = conn.execute(sa.text(f"INSERT INTO {table} ({names}) VALUES "
                               f"({', '.join(':' + n for n in values)}) RETURNING id"), values)
    return row.scalar()


def _populate(url: str) -> dict:
    """At 0009: one Moodle registered twice (manual, then dynamic), another LMS once."""
    from web.db import get_engine, upgrade

    upgrade(url, "0009")
    ids = {}
    with get_engine(url).begin() as conn:
        course = _insert(conn, "courses", slug="c", title="C")
        sdpa = _insert(conn, "assignments", course_id=course, slug="sdpa", kind="code")
        manual = _insert(conn, "lti_platforms", issuer="https://moodle.example", client_id="a",
                         deployment_ids="[]")
        dynamic = _insert(conn, "lti_platforms", issuer="https://moodle.example", client_id="b",
                          deployment_ids="[]")
        canvas = _insert(conn, "lti_platforms", issuer="https://canvas.example", client_id="a",
                         deployment_ids="[]")
        # student "4" of Moodle: an account per registration; the first one is the oldest
        ids["old"] = _insert(conn, "users", email="s4@x", role="student", created_at=T0)
        ids["new"] = _insert(conn, "users", email="lti-2-x@lti.invalid", role="student",
                             created_at=T0 + timedelta(days=3))
        ids["canvas"] = _insert(conn, "users", email="c4@x", role="student", created_at=T0)
        _insert(conn, "lti_users", platform_id=manual, sub="4", user_id=ids["old"],
                lms_user_id=None, given_name="Ada")
        _insert(conn, "lti_users", platform_id=dynamic, sub="4", user_id=ids["new"],
                lms_user_id="u-4", given_name="Ada L.")
        _insert(conn, "lti_users", platform_id=canvas, sub="4", user_id=ids["canvas"])
        for user in (ids["old"], ids["new"]):
            _insert(conn, "enrollments", course_id=course, user_id=user, role="student")
        ids["sub_old"] = _insert(conn, "submissions", assignment_id=sdpa, user_id=ids["old"],
                                 status="done", score=90, max_score=100)
        ids["sub_new"] = _insert(conn, "submissions", assignment_id=sdpa, user_id=ids["new"],
                                 status="done", score=100, max_score=100)
        ids["attempt"] = _insert(conn, "quiz_attempts", assignment_id=sdpa, user_id=ids["new"],
                                 status="submitted")
        ids["course"], ids["manual"] = course, manual
    return ids


def _check(url: str, ids: dict) -> None:
    from web.db import get_engine, upgrade

    upgrade(url, "0010")
    with get_engine(url).begin() as conn:
        people = conn.execute(sa.text(
            "SELECT issuer, sub, user_id, platform_id, lms_user_id, given_name FROM lti_users "
            "ORDER BY issuer")).all()
        assert [tuple(p[:3]) for p in people] == [
            ("https://canvas.example", "4", ids["canvas"]),  # another LMS: another person
            ("https://moodle.example", "4", ids["old"])]
        moodle = people[1]
        assert (moodle.lms_user_id, moodle.given_name) == ("u-4", "Ada")  # gaps filled in
        owners = dict(conn.execute(sa.text("SELECT id, user_id FROM submissions")).all())
        assert owners == {ids["sub_old"]: ids["old"], ids["sub_new"]: ids["old"]}
        assert conn.execute(sa.text("SELECT user_id FROM quiz_attempts")).scalar() == ids["old"]
        assert conn.execute(sa.text("SELECT user_id FROM enrollments")).scalars().all() == [ids["old"]]
        assert conn.execute(sa.text("SELECT COUNT(*) FROM users WHERE id = :id"),
                            {"id": ids["new"]}).scalar() == 0  # the emptied account is gone
        # Removing a registration keeps its people (they may launch through the other one).
        conn.execute(sa.text("DELETE FROM lti_platforms WHERE id = :id"), {"id": ids["manual"]})
        assert conn.execute(sa.text(
            "SELECT platform_id FROM lti_users WHERE issuer = 'https://moodle.example'")
        ).scalar() is None
        # One person per (issuer, sub): a second row is refused by the database.
        with pytest.raises(sa.exc.IntegrityError):
            with conn.begin_nested():
                _insert(conn, "lti_users", issuer="https://canvas.example", sub="4",
                        user_id=ids["old"])
    upgrade(url, "head")


def test_the_migration_merges_the_accounts_of_one_person_on_sqlite(tmp_path):
    from web.db import dispose_engines

    url = f"sqlite:///{tmp_path / 'grader.db'}"
    try:
        _check(url, _populate(url))
    finally:
        dispose_engines()


@pytest.mark.integration
def test_the_migration_merges_the_accounts_of_one_person_on_postgresql():
    if not _reachable(5432):
        pytest.skip("PostgreSQL is not reachable on 127.0.0.1:5432")
    from web.db import dispose_engines

    admin = sa.create_engine("postgresql+psycopg://postgres@127.0.0.1:5432/test",
                             isolation_level="AUTOCOMMIT")
    name = f"attn_test_m3_{uuid.uuid4().hex[:8]}"
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    try:
        _check(url, _populate(url))
    finally:
        dispose_engines()
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
