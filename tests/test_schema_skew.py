"""Version skew in a rolling upgrade: older code on a newer schema (web/schema.py), the advice
when it cannot run there, and the supervisor's back-off for a worker that keeps exiting."""
import subprocess
import sys

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from grader.cli import main
from service_support import ROOT, env_for, make_config, migrate, wait_until
from web import schema
from web.db import DatabaseNotMigrated, check_migrated, get_engine
from web.dispatch.supervisor import EXIT_SCHEMA, RestartBackoff

CHAIN = (("0011", "0009", True), ("0009", "0008", True), ("0008", "0007", False),
         ("0007", None, False))


def record(*rows):
    return {rev: (down, flag) for rev, down, flag in rows}


def test_older_code_runs_on_a_newer_schema_when_every_migration_since_is_compatible():
    newer = record(("0013", "0012", True), ("0012", "0011", True), *CHAIN)
    state = schema.judge("0013", "0011", CHAIN, newer, minimum="0011")
    assert state.usable and "ahead" in state.summary


def test_an_incompatible_migration_refuses_older_code_and_says_to_upgrade_the_code():
    newer = record(("0013", "0012", True), ("0012", "0011", False), *CHAIN)
    state = schema.judge("0013", "0011", CHAIN, newer, minimum="0011")
    assert not state.usable
    assert "migration 0012 is not compatible" in state.summary
    assert "older than the database" in state.advice and "upgrade the code" in state.advice
    assert "db downgrade 0011" in state.advice and "db upgrade" not in state.advice
    # a database migrated before the rule existed records nothing: refused the same way
    unrecorded = schema.judge("0013", "0011", CHAIN, {}, minimum="0011")
    assert not unrecorded.usable and "db upgrade`" not in unrecorded.advice


def test_a_schema_behind_the_codes_minimum_asks_for_db_upgrade():
    behind = schema.judge("0008", "0011", CHAIN, {}, minimum="0009")
    assert not behind.usable and "needs revision 0009 or later" in behind.summary
    assert "attn-grader db upgrade" in behind.advice
    assert schema.judge("0009", "0011", CHAIN, {}, minimum="0009").usable  # at the minimum
    assert not schema.judge(None, "0011", CHAIN, {}).usable


def _pretend_a_newer_release_migrated(url, compatible: bool) -> str:
    """The database as a newer release leaves it: one more revision, recorded with its flag."""
    head = schema.code_chain()[0][0]
    with get_engine(url).begin() as conn:
        conn.execute(text("INSERT INTO schema_revisions VALUES ('9999_next', :head, :flag)"),
                     {"head": head, "flag": compatible})
        conn.execute(text("UPDATE alembic_version SET version_num = '9999_next'"))
    return head


def test_migrations_record_the_chain_for_older_code(tmp_path):
    url = f"sqlite:///{tmp_path / 'g.db'}"
    migrate(url)
    with get_engine(url).connect() as conn:
        assert schema.recorded_chain(conn) == {r: (d, f) for r, d, f in schema.code_chain()}
    assert check_migrated(get_engine(url)).summary == "ok"


def test_this_code_on_a_newer_compatible_schema_starts_and_explains_otherwise(tmp_path):
    config = make_config(tmp_path)
    migrate(config["DATABASE_URL"])
    head = _pretend_a_newer_release_migrated(config["DATABASE_URL"], compatible=True)
    engine = get_engine(config["DATABASE_URL"])
    assert check_migrated(engine).usable
    env = {"ATTN_GRADER_DATABASE_URL": config["DATABASE_URL"],
           "ATTN_GRADER_INSTANCE_PATH": config["INSTANCE_PATH"]}
    current = CliRunner().invoke(main, ["db", "current"], env=env).output
    assert "database: 9999_next" in current and "usable: at revision 9999_next, ahead" in current

    with engine.begin() as conn:
        conn.execute(text("UPDATE schema_revisions SET compatible_with_previous = false "
                          "WHERE revision = '9999_next'"))
    with pytest.raises(DatabaseNotMigrated, match="older than the database") as refused:
        check_migrated(engine)
    assert "Run `attn-grader db upgrade`" not in str(refused.value)
    upgrade = CliRunner().invoke(main, ["db", "upgrade"], env=env)
    assert upgrade.exit_code == 1 and "newer than this code's" in upgrade.output
    assert f"db downgrade {head}" in upgrade.output and "Traceback" not in upgrade.output


def test_a_worker_restarted_mid_rollout_comes_back_or_exits_once_with_the_reason(tmp_path):
    """The drill's O1 with real processes: this code plays the old release on a database a
    newer one migrated. Compatible: the worker starts and grades. Not: it exits with
    EXIT_SCHEMA and one log line that says to upgrade the code (its supervisor backs off)."""
    from web.db import session_factory
    from web.models import Submission, User
    from web.services.courses import find_assignment
    from web.services.submissions import submit
    from service_support import seed_people

    config = make_config(tmp_path)
    url = config["DATABASE_URL"]
    migrate(url)
    people = seed_people(get_engine(url))
    _pretend_a_newer_release_migrated(url, compatible=True)
    with session_factory(get_engine(url))() as session:
        sub = submit(session, session.get(User, people["ada"]["id"]),
                     find_assignment(session, "sdpa"), "def sdpa(): pass\n# SCORE=7\n")
        session.commit()
        sub_id = sub.id
    worker = subprocess.Popen([sys.executable, "-m", "web.dispatch.worker", "--name", "old:cpu0"],
                              env=env_for(config), cwd=ROOT)
    try:
        def graded():
            with session_factory(get_engine(url))() as session:
                return session.get(Submission, sub_id).status == "done"
        wait_until(graded, timeout=60, what="the old worker to grade on the newer schema")
    finally:
        worker.terminate()
        worker.wait(30)

    with get_engine(url).begin() as conn:
        conn.execute(text("UPDATE schema_revisions SET compatible_with_previous = false"))
    refused = subprocess.run([sys.executable, "-m", "web.dispatch.worker", "--name", "old:cpu1"],
                             env=env_for(config), cwd=ROOT, capture_output=True, text=True,
                             timeout=120)
    assert refused.returncode == EXIT_SCHEMA
    assert "older than the database" in refused.stderr and "Traceback" not in refused.stderr


def test_restarts_back_off_while_a_worker_keeps_exiting_soon_after_its_start():
    backoff = RestartBackoff()
    backoff.started(0.0)
    pauses, now = [], 0.0
    for _ in range(9):  # each run lasts 2 s, then it exits (refused at start)
        now += 2.0
        pause = backoff.after_exit(now)
        assert backoff.after_exit(now + 0.5) is None  # the same exit is counted once
        pauses.append(pause)
        now += pause
        backoff.started(now)
    assert pauses == [1, 2, 4, 8, 16, 32, 60, 60, 60]
    now += 3600  # a long useful run, then a crash: restarted at once, the count starts over
    assert backoff.after_exit(now) == 0
    backoff.started(now)
    assert backoff.after_exit(now + 1) == 1


@pytest.mark.integration
def test_a_migration_waiting_for_a_lock_gives_up_after_the_lock_timeout(pg_url, monkeypatch):
    """O8: behind a long transaction the migration fails after MIGRATION_LOCK_TIMEOUT, rolled
    back, instead of queueing every later query on the table behind its lock."""
    from sqlalchemy import create_engine
    from sqlalchemy.exc import OperationalError

    from web.db import current_revision, upgrade

    server = pg_url.rsplit("/", 1)[0]
    admin = create_engine(f"{server}/test", isolation_level="AUTOCOMMIT")
    url = f"{pg_url}_lock"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{url.rsplit("/", 1)[1]}"'))
    before = next(down for rev, down, _flag in schema.code_chain() if rev == "0011")
    try:
        upgrade(url, before)  # 0011 alters submissions, which the long transaction holds
        monkeypatch.setenv("ATTN_GRADER_MIGRATION_LOCK_TIMEOUT", "1")
        holder = create_engine(url)
        with holder.connect() as long_transaction:
            long_transaction.execute(text("LOCK TABLE submissions IN ACCESS SHARE MODE"))
            with pytest.raises(OperationalError, match="lock timeout"):
                upgrade(url)
        holder.dispose()
        assert current_revision(get_engine(url)) == before  # nothing half-applied
        upgrade(url)  # run again once the long transaction ended
        assert check_migrated(get_engine(url)).summary == "ok"
    finally:
        get_engine(url).dispose()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)'))
        admin.dispose()
