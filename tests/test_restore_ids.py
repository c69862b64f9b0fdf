"""O7: a restored database must not make old links name someone else's submission.

Submissions carry a random ``public_id`` (web/public_ids.py): links and receipts name it, the
API and the page link accept it (and the integer, for older links). The restore tests take a
backup, let the live service accept more, restore the backup and accept new submissions
there: the integer ids come back, the public ids do not.
"""
import shutil
import subprocess
import uuid

import pytest
from sqlalchemy import create_engine, select, text

from service_support import make_config, migrate, seed_people
from web import create_app
from web.db import dispose_engines, get_engine, session_factory
from web.models import Submission
from web.public_ids import PUBLIC_ID


def _client(config, people):
    app = create_app({**config, "PAGES": True, "WTF_CSRF_ENABLED": False})
    client = app.test_client()

    def post(who, code):
        r = client.post("/api/v1/submissions", json={"task": "sdpa", "code": code},
                        headers={"Authorization": f"Bearer {people[who]['token']}"})
        assert r.status_code == 202, r.get_data(as_text=True)
        return r.get_json()

    def get(who, url):
        return client.get(url, headers={"Authorization": f"Bearer {people[who]['token']}"})

    return client, post, get


def test_links_and_the_api_name_submissions_by_public_id(service):
    client, post, get = _client(service.config, service.people)
    body = post("ada", "# SCORE=6\n")
    assert PUBLIC_ID.fullmatch(body["public_id"])
    assert body["url"].endswith(f"/api/v1/submissions/{body['public_id']}")
    assert body["page_url"].endswith(f"/s/{body['public_id']}")
    assert get("ada", body["url"]).get_json()["id"] == body["id"]
    assert get("ada", f"/api/v1/submissions/{body['id']}").get_json()["public_id"] == \
        body["public_id"]  # integer links of older receipts still work
    assert get("ada", "/api/v1/submissions/0123456789abcdef").status_code == 404
    assert get("ada", "/api/v1/submissions/not-an-id").status_code == 404
    assert get("bob", body["url"]).status_code == 404  # someone else's: as before
    listed = get("ada", "/api/v1/submissions").get_json()["submissions"]
    assert listed[0]["public_id"] == body["public_id"]
    anonymous = client.get(f"/s/{body['public_id']}")
    assert anonymous.status_code == 302 and "/sign-in" in anonymous.location
    assert client.post("/sign-in", data={"email": "ada@example.org",
                                         "password": "correct horse"}).status_code == 302
    page = client.get(f"/s/{body['public_id']}")  # the submission's own page
    assert page.status_code == 200 and f"/submissions/{body['id']}/status.json" in page.text
    assert client.get("/s/0123456789abcdef").status_code == 404


def test_a_public_id_of_digits_only_names_its_submission(service):
    """One public id in about 1,800 is sixteen digits: it is still that submission's public id, not
    an integer id (which named another submission, or on PostgreSQL was out of range: a 500)."""
    client, post, get = _client(service.config, service.people)
    body = post("ada", "# SCORE=6\n")
    digits = "8239826658149586"  # the one CI drew
    with session_factory(service.engine)() as session:
        session.get(Submission, body["id"]).public_id = digits
        session.commit()
    shown = get("ada", f"/api/v1/submissions/{digits}")
    assert shown.status_code == 200 and shown.get_json()["id"] == body["id"], shown.get_data(as_text=True)
    assert client.get(f"/s/{digits}").status_code == 302  # the page link: to sign in, not a 500
    for ref in ("9" * 12, "2147483648", "\u00b2"):  # past the integer column, a superscript digit
        assert get("ada", f"/api/v1/submissions/{ref}").status_code == 404, ref
    assert get("ada", f"/api/v1/submissions/{body['id']}").get_json()["public_id"] == digits


def _restore_then_submit(config, people, backup, restore):
    """Three submissions, a backup, two more (lost with the restore), the restore, two new."""
    _client_, post, _get = _client(config, people)
    before = [post("ada", f"# SCORE={i}\n") for i in (1, 2, 3)]
    backup()
    lost = [post("bob", f"# SCORE={i}\n") for i in (4, 5)]
    dispose_engines()
    config = restore() or config
    _client_, post, get = _client(config, people)
    new = [post("ada", f"# SCORE={i}\n") for i in (6, 7)]
    # the integer ids are issued again (the sequence is the backup's) ...
    assert [s["id"] for s in new] == [s["id"] for s in lost]
    # ... the public ids are not, so a lost submission's link finds nothing, not another's
    assert not {s["public_id"] for s in new} & {s["public_id"] for s in lost}
    for gone in lost:
        assert get("bob", gone["url"]).status_code == 404
        assert get("ada", gone["url"]).status_code == 404
    for kept in before:
        assert get("ada", kept["url"]).get_json()["public_id"] == kept["public_id"]
    with session_factory(get_engine(config["DATABASE_URL"]))() as session:
        assert session.scalar(select(Submission.public_id).where(
            Submission.id == new[0]["id"])) == new[0]["public_id"]


def test_a_sqlite_restore_then_new_submissions_reuse_no_link(tmp_path):
    config = make_config(tmp_path)
    path = tmp_path / "grader.db"
    migrate(config["DATABASE_URL"])
    people = seed_people(get_engine(config["DATABASE_URL"]))

    def backup():  # SQLite's online backup API, as `sqlite3 grader.db .backup` does
        import sqlite3

        with sqlite3.connect(path) as live, sqlite3.connect(tmp_path / "backup.db") as copy:
            live.backup(copy)

    def restore():  # the copy is the service's database from now on
        shutil.copy(tmp_path / "backup.db", tmp_path / "restored.db")
        return {**config, "DATABASE_URL": f"sqlite:///{tmp_path / 'restored.db'}"}

    _restore_then_submit(config, people, backup, restore)


@pytest.mark.integration
def test_a_postgresql_restore_then_new_submissions_reuse_no_link(tmp_path, pg_url):
    if shutil.which("pg_dump") is None or shutil.which("pg_restore") is None:
        pytest.skip("pg_dump/pg_restore are not installed")
    server = pg_url.rsplit("/", 1)[0]
    name = f"attn_restore_{uuid.uuid4().hex[:8]}"
    url = f"{server}/{name}"
    plain = url.replace("postgresql+psycopg://", "postgresql://")
    admin = create_engine(f"{server}/test", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    dump = tmp_path / "backup.dump"
    try:
        config = make_config(tmp_path, url)
        migrate(url)
        people = seed_people(get_engine(url))

        def backup():
            subprocess.run(["pg_dump", "-Fc", "-f", str(dump), plain], check=True)

        def restore():  # into the same database name, emptied, as a real restore would
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
                conn.execute(text(f'CREATE DATABASE "{name}"'))
            subprocess.run(["pg_restore", "--no-owner", "-d", plain, str(dump)], check=True)

        _restore_then_submit(config, people, backup, restore)
    finally:
        dispose_engines()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
