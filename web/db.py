"""Engines, sessions and migrations.

SQLite is used by several processes at once (the web server and the grading workers), so
every connection runs in WAL mode with a busy timeout, and a transaction that will write
can start with ``BEGIN IMMEDIATE`` (``write_session``): it takes the write lock up front and
waits for it, instead of failing later when a read transaction tries to upgrade.

The SQLite file holds password hashes, API token hashes and every student's work, so it is
created 0600 whatever the umask (and an existing one is tightened); SQLite gives its -wal and
-shm files the database file's mode.
"""
from __future__ import annotations

import functools
import os
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"
_engines: dict[str, Engine] = {}


class DatabaseNotMigrated(RuntimeError):
    """The database schema is not at the revision this code expects."""


def make_engine(url: str) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True, future=True)
    if parsed.database and parsed.database != ":memory:":
        private_sqlite_file(Path(parsed.database))
    engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _sqlite_connect(dbapi_conn, _record):
        dbapi_conn.isolation_level = None  # let the "begin" hook below emit BEGIN
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _sqlite_begin(conn):
        immediate = conn.get_execution_options().get("sqlite_immediate", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


SQLITE_FILE_MODE = 0o600


def private_sqlite_file(path: Path) -> None:
    """Create the database file (and its folder) readable by its owner only, before SQLite does.

    ``os.open``'s mode is masked by the umask, which may only take bits away; the ``chmod``
    afterwards sets exactly 0600 (also on a file an older version created 0644, and on -wal
    and -shm files left from then).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, SQLITE_FILE_MODE))
    for companion in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}-journal")):
        try:
            os.chmod(companion, SQLITE_FILE_MODE)
        except FileNotFoundError:
            pass


def get_engine(url: str) -> Engine:
    """One engine (and connection pool) per URL per process."""
    if url not in _engines:
        _engines[url] = make_engine(url)
    return _engines[url]


def dispose_engines() -> None:
    """Close pooled connections, e.g. in a child after fork or at the end of a test."""
    for engine in _engines.values():
        engine.dispose()
    _engines.clear()


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def session_factory(engine: Engine) -> sessionmaker:
    return sessionmaker(bind=engine, expire_on_commit=False)


def writing(engine: Engine) -> Engine:
    """The same engine, whose transactions take SQLite's write lock at BEGIN."""
    return engine.execution_options(sqlite_immediate=True) if is_sqlite(engine) else engine


@contextmanager
def write_session(engine: Engine):
    """A session for a read-then-write transaction; commits on success, rolls back on error."""
    with Session(bind=writing(engine), expire_on_commit=False) as session:
        with session.begin():
            yield session


# ---- migrations --------------------------------------------------------------------------

def alembic_config(url: str):
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


@functools.cache  # the code's own migrations: compiling them all took 12 ms of every /healthz
def head_revision() -> str:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(url: str, revision: str = "head") -> None:
    from alembic import command

    command.upgrade(alembic_config(url), revision)


def check_migrated(engine: Engine):
    """Raise ``DatabaseNotMigrated`` with what to do when this code cannot run on the schema
    (behind what the code needs, or ahead of it by a migration older code cannot run on:
    ``web.schema``); returns the ``SchemaState`` otherwise."""
    from .schema import schema_state

    state = schema_state(engine)
    if not state.usable:
        where = engine.url.render_as_string(hide_password=True)
        raise DatabaseNotMigrated(f"The database {where} {state.summary}. {state.advice}")
    return state
