"""Schema, migrations, configuration and authentication of the grading service."""
import os
import stat

import pytest
from sqlalchemy import inspect, select

from service_support import make_config
from web import create_app
from web.auth import authenticate, hash_password, issue_token, revoke_tokens, user_for_token
from web.config import load_config
from web.db import (DatabaseNotMigrated, check_migrated, current_revision, get_engine,
                    head_revision, session_factory, upgrade)
from web.models import ApiToken, Base, User


def test_migrations_create_exactly_the_models_tables(tmp_path):
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    url = f"sqlite:///{tmp_path / 'm.db'}"
    upgrade(url)
    engine = get_engine(url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == [], f"models and migrations disagree; add a revision: {diff}"
    assert set(Base.metadata.tables) <= set(inspect(engine).get_table_names())
    assert current_revision(engine) == head_revision()


def test_app_refuses_an_unmigrated_database_and_says_what_to_run(tmp_path):
    config = make_config(tmp_path)
    with pytest.raises(DatabaseNotMigrated, match="attn-grader db upgrade"):
        create_app(config)
    upgrade(config["DATABASE_URL"], "base")  # an empty but versioned database: still refused
    with pytest.raises(DatabaseNotMigrated, match="no tables yet"):
        check_migrated(get_engine(config["DATABASE_URL"]))
    upgrade(config["DATABASE_URL"])
    assert create_app(config).extensions["attn_grader"].engine is not None


def test_downgrade_then_upgrade_round_trips(tmp_path):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    upgrade(url)
    upgrade(url, "head")
    from alembic import command

    from web.db import alembic_config

    command.downgrade(alembic_config(url), "base")
    assert "users" not in inspect(get_engine(url)).get_table_names()
    upgrade(url)
    assert "grading_jobs" in inspect(get_engine(url)).get_table_names()


def test_laptop_defaults_live_under_instance_with_a_private_secret(tmp_path):
    config = load_config({"INSTANCE_PATH": str(tmp_path / "inst")}, environ={})
    assert config["DATABASE_URL"] == f"sqlite:///{tmp_path / 'inst' / 'attn_grader.db'}"
    secret = tmp_path / "inst" / "secret_key"
    assert stat.S_IMODE(os.stat(secret).st_mode) == 0o600
    assert config["SECRET_KEY"] == secret.read_text().strip() and len(config["SECRET_KEY"]) == 64
    again = load_config({"INSTANCE_PATH": str(tmp_path / "inst")}, environ={})
    assert again["SECRET_KEY"] == config["SECRET_KEY"]  # generated once, then reused


def test_environment_variables_use_one_prefix_and_are_validated(tmp_path):
    env = {"ATTN_GRADER_INSTANCE_PATH": str(tmp_path), "ATTN_GRADER_WORKERS": "5",
           "ATTN_GRADER_SEED_DEMO": "no", "ATTN_GRADER_BROKER_URL": "redis://h:6379/2"}
    config = load_config(environ=env)
    assert (config["WORKERS"], config["SEED_DEMO"], config["BROKER_URL"]) == \
        (5, False, "redis://h:6379/2")
    with pytest.raises(ValueError, match="ATTN_GRADER_WORKERS='many': expected an integer"):
        load_config(environ={**env, "ATTN_GRADER_WORKERS": "many"})
    with pytest.raises(ValueError, match="SANDBOX"):
        load_config(environ={**env, "ATTN_GRADER_SANDBOX": "docker"})
    url = load_config(environ={**env, "ATTN_GRADER_DATABASE_URL": "postgres://u@h/db"})
    assert url["DATABASE_URL"] == "postgresql+psycopg://u@h/db"


def test_passwords_are_argon2id_and_checked(service):
    with session_factory(service.engine)() as session:
        user = session.scalar(select(User).where(User.email == "ada@example.org"))
        assert user.password_hash.startswith("$argon2id$")
        assert authenticate(session, " ADA@example.org ", "correct horse") == user
        assert authenticate(session, "ada@example.org", "wrong horse") is None
        assert authenticate(session, "nobody@example.org", "correct horse") is None
        user.is_active = False
        assert authenticate(session, "ada@example.org", "correct horse") is None
    with pytest.raises(ValueError, match="at least 8"):
        hash_password("short")


def test_api_tokens_are_stored_hashed_and_can_be_revoked(service):
    with session_factory(service.engine)() as session:
        user = session.scalar(select(User).where(User.email == "bob@example.org"))
        token = issue_token(session, user, "laptop")
        stored = session.scalars(select(ApiToken.token_hash)).all()
        assert token not in stored and len(stored) == 4  # 3 seeded + this one
        assert user_for_token(session, token) == user
        assert user_for_token(session, token + "x") is None
        assert user_for_token(session, "not-a-token") is None
        assert revoke_tokens(session, user) == 2
        assert user_for_token(session, token) is None


@pytest.mark.integration
def test_postgresql_migrations_match_the_models_and_round_trip(_seeded_pg):
    from alembic import command
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext
    from sqlalchemy import create_engine, text

    from web.db import alembic_config

    url, _people = _seeded_pg
    with get_engine(url).connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
    # a scratch database for the round trip, so the session's data stays
    admin = create_engine(url.rsplit("/", 1)[0] + "/test", isolation_level="AUTOCOMMIT")
    scratch = url + "_rt"
    name = scratch.rsplit("/", 1)[1]
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        upgrade(scratch)
        command.downgrade(alembic_config(scratch), "base")
        assert inspect(get_engine(scratch)).get_table_names() == ["alembic_version"]
        upgrade(scratch)
        assert current_revision(get_engine(scratch)) == head_revision()
    finally:
        get_engine(scratch).dispose()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def test_the_sqlite_database_and_its_wal_files_are_private_whatever_the_umask(tmp_path):
    from web.db import make_engine, upgrade

    url = f"sqlite:///{tmp_path / 'data' / 'grader.db'}"
    old = os.umask(0)  # the most permissive umask: files would be 0666
    try:
        upgrade(url)  # Alembic creates the file through the same engine set-up
        engine = make_engine(url)
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE probe (x INTEGER)")
            conn.exec_driver_sql("INSERT INTO probe VALUES (1)")
            files = sorted(p.name for p in (tmp_path / "data").iterdir())
            modes = {p.name: stat.S_IMODE(os.stat(p).st_mode) for p in (tmp_path / "data").iterdir()}
        engine.dispose()
    finally:
        os.umask(old)
    assert files == ["grader.db", "grader.db-shm", "grader.db-wal"]
    assert modes == {name: 0o600 for name in files}

    loose = tmp_path / "old.db"  # made by an earlier version under a 022 umask
    loose.write_bytes(b"")
    os.chmod(loose, 0o644)
    make_engine(f"sqlite:///{loose}").dispose()
    assert stat.S_IMODE(os.stat(loose).st_mode) == 0o600
