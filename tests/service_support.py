"""Helpers for the service tests: a migrated database, users, a fake grader, a live server.

The fake grader (``fake_grade``) reads instructions from the submitted code so one test can
ask for a slow grade, a grader crash or a given score:
``# SCORE=7`` (out of 10), ``# SLEEP=2.5`` (seconds), ``# GRADER_ERROR`` (raise).
With ``ATTN_TEST_GRADE_LOG`` set, every grading start and end of code tagged ``# ID=<code-id>``
is appended to that file as ``start <pid> <code-id>`` / ``end <pid> <code-id>``, which is how
tests count runs across worker processes (untagged code, such as the reference implementation
each worker grades once to warm up before its first claim, is not logged).
"""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
FAKE_GRADER = "service_support:fake_grade"


def fake_grade(code, task, *, sandbox="auto", device="cpu", seed=None, **_):
    tag = re.search(r"# ID=(\S+)", code)
    tag = tag.group(1) if tag else None
    log = os.environ.get("ATTN_TEST_GRADE_LOG") if tag else None
    if log:
        with open(log, "a") as fh:
            fh.write(f"start {os.getpid()} {tag}\n")
    sleep = re.search(r"# SLEEP=([0-9.]+)", code)
    if sleep:
        time.sleep(float(sleep.group(1)))
    if "# GRADER_ERROR" in code:
        raise RuntimeError("grader machinery broke")
    score = re.search(r"# SCORE=([0-9.]+)", code)
    score = float(score.group(1)) if score else 10.0
    if log:
        with open(log, "a") as fh:
            fh.write(f"end {os.getpid()} {tag}\n")
    return {
        "task": task, "score": score, "max_score": 10.0, "passed": score >= 10.0,
        "checks": [
            {"id": "shape", "passed": True, "points": min(score, 4.0), "max_points": 4.0,
             "message": "output shape matches", "details": {"shape": [2, 3]}},
            {"id": "values", "passed": score >= 10.0, "points": max(0.0, score - 4.0),
             "max_points": 6.0, "message": "" if score >= 10 else "max abs error 0.3 at [0, 1]",
             "details": {"max_abs_error": float("nan") if score == 0 else 0.3}},
        ],
        "error": None, "grader_version": "fake-1.0", "sandbox": sandbox, "warnings": [],
        "timings": {"total": 0.01},
    }


def grade_log_lines(path) -> list[list[str]]:
    p = Path(path)
    return [line.split() for line in p.read_text().splitlines()] if p.exists() else []


def make_config(tmp_path, database_url: str | None = None, **overrides) -> dict:
    from web.config import load_config

    base = {"INSTANCE_PATH": str(tmp_path / "instance"),
            "DATABASE_URL": database_url or f"sqlite:///{tmp_path / 'grader.db'}",
            "SECRET_KEY": "test-secret", "GRADE_FUNCTION": FAKE_GRADER, "SANDBOX": "none",
            "LEASE_SECONDS": 2.0, "POLL_SECONDS": 0.05, "QUEUED_STALE_SECONDS": 5.0,
            "RECONCILE_SECONDS": 0.5, "SEED_DEMO": False, "TESTING": True,
            "API_RATE_LIMIT": "10000 per minute", "PAGES": False}
    base.update(overrides)
    return load_config(base, environ={})


def migrate(url: str) -> None:
    from web.db import upgrade

    upgrade(url)


def seed_people(engine) -> dict:
    """The default course, one instructor and two students, each with an API token."""
    from web.auth import issue_token
    from web.db import session_factory
    from web.services.courses import ensure_default_course
    from web.services.users import add_user

    with session_factory(engine)() as session:
        ensure_default_course(session)
        people = {}
        for email, role in (("prof@example.org", "instructor"), ("ada@example.org", "student"),
                            ("bob@example.org", "student")):
            user = add_user(session, email, role, password="correct horse")
            people[email.split("@")[0]] = {"id": user.id, "email": email,
                                           "token": issue_token(session, user)}
        session.commit()
    return people


@contextmanager
def running_server(config: dict, workers: int = 2, **extra):
    """`attn-grader serve` on a free port with ``config`` (``extra``: more environment);
    yields (base URL, the list its output lines are collected into)."""
    import requests

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "grader.cli", "serve", "--port", str(port), "--workers", str(workers)],
        env=env_for(config, **extra), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output: list = []
    threading.Thread(target=lambda: output.extend(proc.stdout), daemon=True).start()
    url = f"http://127.0.0.1:{port}"

    def up():
        assert proc.poll() is None, "serve exited:\n" + "".join(output)
        try:
            return requests.get(url + "/healthz", timeout=1).ok
        except (requests.ConnectionError, requests.Timeout):  # not up yet, or slow on a busy host
            return False

    try:
        wait_until(up, timeout=60, what="the server to answer")
        yield url, output
    finally:
        proc.terminate()
        # serve's supervisor gives its workers 30 s to finish before SIGKILL (Supervisor.stop): wait past that.
        proc.wait(30 + 15)


def env_for(config: dict, **extra) -> dict:
    """A subprocess environment carrying ``config`` and the fake grader's import path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTN_GRADER_")}
    for key in ("DATABASE_URL", "INSTANCE_PATH", "SECRET_KEY", "GRADE_FUNCTION", "SANDBOX",
                "LEASE_SECONDS", "POLL_SECONDS", "QUEUED_STALE_SECONDS", "RECONCILE_SECONDS",
                "BROKER_URL", "BROKER_NAMESPACE", "API_RATE_LIMIT", "MAX_ATTEMPTS", "PAGES"):
        if config.get(key) is not None:
            env["ATTN_GRADER_" + key] = str(config[key])
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(ROOT), env.get("PYTHONPATH", "")])
    env["ATTN_GRADER_SEED_DEMO"] = "false"
    env.update({k: str(v) for k, v in extra.items()})
    return env


def spawn_worker(config: dict, name: str, queues: str = "cpu", **env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "web.dispatch.worker", "--queues", queues,
                             "--name", name], env=env_for(config, **env), cwd=ROOT)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate, timeout: float = 30.0, interval: float = 0.05, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


# ---- external servers (integration tests) ------------------------------------------------

def _reachable(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def pg_url():
    """A fresh PostgreSQL database for this test session, dropped afterwards."""
    if not _reachable(5432):
        pytest.skip("PostgreSQL is not reachable on 127.0.0.1:5432 "
                    "(run scripts/services.sh to start it)")
    from sqlalchemy import create_engine, text

    name = f"attn_test_{uuid.uuid4().hex[:10]}"
    admin = create_engine("postgresql+psycopg://postgres@127.0.0.1:5432/test",
                          isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # server up but unusable (auth, permissions)
        pytest.skip(f"cannot create a PostgreSQL test database: {exc}")
    yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    from web.db import dispose_engines

    dispose_engines()
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(scope="session")
def redis_url():
    """Redis db 15 with a unique key namespace; only this session's keys are deleted."""
    if not _reachable(6379):
        pytest.skip("Redis is not reachable on 127.0.0.1:6379 (run scripts/services.sh)")
    import redis

    url = "redis://127.0.0.1:6379/15"
    namespace = f"attn_test_{uuid.uuid4().hex[:10]}"
    client = redis.Redis.from_url(url)
    yield url, namespace
    for key in client.scan_iter(f"{namespace}*"):
        client.delete(key)
    client.close()


@pytest.fixture(scope="session")
def _seeded_sqlite(tmp_path_factory):
    """A migrated, seeded SQLite file made once; each test gets a copy (argon2 is slow)."""
    from web.db import get_engine

    path = tmp_path_factory.mktemp("template") / "grader.db"
    url = f"sqlite:///{path}"
    migrate(url)
    engine = get_engine(url)
    people = seed_people(engine)
    engine.dispose()  # checkpoints the WAL into the file
    return path, people


@pytest.fixture(scope="session")
def _seeded_pg(pg_url):
    """The session's PostgreSQL database, migrated and seeded once."""
    from web.db import get_engine

    migrate(pg_url)
    return pg_url, seed_people(get_engine(pg_url))


def _reset_pg(url: str) -> None:
    """Empty everything but the people, and put the default assignments back."""
    from sqlalchemy import text

    from web.db import get_engine, session_factory
    from web.services.courses import ensure_default_course

    engine = get_engine(url)
    with engine.begin() as conn:
        conn.execute(text("TRUNCATE manual_grades, quiz_answers, quiz_attempts, check_results, "
                          "results, grading_jobs, submissions, similarity_reports, assignments, "
                          "invitations, signup_settings, data_requests, "
                          "lti_score_syncs, lti_resource_links, lti_contexts, lti_users, "
                          "lti_platforms, lti_launch_data RESTART IDENTITY CASCADE"))
    with session_factory(engine)() as session:
        ensure_default_course(session)
        session.commit()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)])
def service(request, tmp_path):
    """A migrated database with people, and its config (fake grader, short lease).

    Runs each test twice: on SQLite (a copy of a seeded file) and on the PostgreSQL at
    127.0.0.1 (skipped with a reason when it is unreachable).
    """
    import shutil
    from types import SimpleNamespace

    from web.db import dispose_engines, get_engine

    if request.param == "sqlite":
        template, people = request.getfixturevalue("_seeded_sqlite")
        shutil.copy(template, tmp_path / "grader.db")
        url = f"sqlite:///{tmp_path / 'grader.db'}"
    else:
        url, people = request.getfixturevalue("_seeded_pg")
        _reset_pg(url)
    config = make_config(tmp_path, url)
    engine = get_engine(config["DATABASE_URL"])
    yield SimpleNamespace(config=config, engine=engine, people=people, tmp_path=tmp_path,
                          backend=request.param)
    dispose_engines()
