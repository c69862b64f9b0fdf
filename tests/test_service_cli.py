"""The service's admin commands: db, users, regrade, and serve's refusal on an old schema."""
import pytest
from click.testing import CliRunner
from sqlalchemy import select

from grader.cli import main
from service_support import fake_grade
from web.auth import user_for_token
from web.db import session_factory
from web.dispatch.worker import GradingWorker
from web.models import Result, Submission, User
from web.services.courses import find_assignment
from web.services.submissions import submit


def better_grader(code, task, **kw):
    """The 'new grader version' of the regrade tests: one point more than before."""
    report = fake_grade(code, task, **kw)
    report["score"] = min(10.0, report["score"] + 1)
    report["grader_version"] = "fake-2.0"
    return report


def _env(config, **extra):
    env = {f"ATTN_GRADER_{k}": str(config[k]) for k in
           ("DATABASE_URL", "INSTANCE_PATH", "SECRET_KEY", "SANDBOX", "GRADE_FUNCTION")}
    env.update(extra)
    return env


def test_db_upgrade_then_current(tmp_path):
    from web.db import head_revision

    head = head_revision()  # the newest migration, whichever branch added it
    env = {"ATTN_GRADER_INSTANCE_PATH": str(tmp_path)}
    runner = CliRunner()
    result = runner.invoke(main, ["db", "current"], env=env)
    assert f"database: (empty); code: {head}" in result.output
    assert "run `attn-grader db upgrade`" in result.output
    result = runner.invoke(main, ["serve", "--port", "5999"], env=env)
    assert result.exit_code == 1 and "Run `attn-grader db upgrade`" in result.output
    result = runner.invoke(main, ["db", "upgrade"], env=env)
    assert result.exit_code == 0 and f"is at revision {head}" in result.output
    assert f"database: {head}; code: {head}" in runner.invoke(main, ["db", "current"],
                                                               env=env).output


@pytest.mark.parametrize("service", ["sqlite"], indirect=True)
def test_users_add_and_token(service):
    runner, env = CliRunner(), _env(service.config)
    result = runner.invoke(main, ["users", "add", "Cleo@Example.org", "--role", "instructor",
                                  "--password-stdin"], input="a long passphrase 42\n", env=env)
    assert result.exit_code == 0 and "added instructor cleo@example.org" in result.output
    again = runner.invoke(main, ["users", "add", "cleo@example.org"], env=env)
    assert again.exit_code == 1 and "already exists" in again.output
    bad = runner.invoke(main, ["users", "add", "x@example.org", "--role", "admin"], env=env)
    assert bad.exit_code == 2 and "'admin' is not one of 'student', 'instructor'" in bad.output
    token = runner.invoke(main, ["users", "token", "cleo@example.org"], env=env).output.strip()
    with session_factory(service.engine)() as session:
        user = user_for_token(session, token)
        assert user.email == "cleo@example.org" and user.is_instructor
    missing = runner.invoke(main, ["users", "token", "nobody@example.org"], env=env)
    assert missing.exit_code == 1 and "no user nobody@example.org" in missing.output
    revoked = runner.invoke(main, ["users", "revoke", "cleo@example.org"], env=env)
    assert "revoked 1 token(s)" in revoked.output


@pytest.mark.parametrize("service", ["sqlite"], indirect=True)
def test_regrade_previews_then_applies_keeping_history(service):
    with session_factory(service.engine)() as session:
        for email, code in (("ada@example.org", "# SCORE=7\n"),
                            ("bob@example.org", "# SCORE=10\n")):
            user = session.scalar(select(User).where(User.email == email))
            submit(session, user, find_assignment(session, "sdpa"), code)
    worker = GradingWorker(service.engine, service.config, grade_fn=fake_grade)
    while worker.run_once():
        pass
    runner = CliRunner()
    env = _env(service.config, ATTN_GRADER_GRADE_FUNCTION="test_service_cli:better_grader")

    preview = runner.invoke(main, ["regrade", "--assignment", "sdpa", "--dry-run"], env=env)
    assert preview.exit_code == 0, preview.output
    lines = preview.output.splitlines()
    assert any("ada@example.org" in l and "7.00 ->    8.00" in l and "fake-1.0 -> fake-2.0  *" in l
               for l in lines)
    assert any("bob@example.org" in l and "10.00 ->   10.00" in l and not l.endswith("*")
               for l in lines)
    assert "2 submission(s), 1 with a different score" in preview.output
    assert "dry run: nothing stored" in preview.output

    declined = runner.invoke(main, ["regrade", "--assignment", "sdpa"], input="n\n", env=env)
    assert "nothing stored" in declined.output
    with session_factory(service.engine)() as session:
        assert session.query(Result).count() == 2

    applied = runner.invoke(main, ["regrade", "--assignment", "sdpa", "--yes"], env=env)
    assert "stored 2 regrade result(s)" in applied.output
    with session_factory(service.engine)() as session:
        ada = session.scalar(select(Submission).join(User).where(User.email == "ada@example.org"))
        assert (ada.score, ada.grader_version) == (8.0, "fake-2.0")
        assert [(r.kind, r.score, r.grader_version) for r in ada.results] == \
            [("grade", 7.0, "fake-1.0"), ("regrade", 8.0, "fake-2.0")]
    unknown = runner.invoke(main, ["regrade", "--assignment", "nope"], env=env)
    assert unknown.exit_code == 1 and "no task assignment 'nope'" in unknown.output


def test_worker_refuses_a_gpu_queue_without_a_gpu(tmp_path):
    env = {"ATTN_GRADER_INSTANCE_PATH": str(tmp_path), "CUDA_VISIBLE_DEVICES": ""}
    runner = CliRunner()
    assert runner.invoke(main, ["db", "upgrade"], env=env).exit_code == 0
    result = runner.invoke(main, ["worker", "--queues", "gpu"], env=env)
    assert result.exit_code == 1 and "--queues gpu: no GPU found" in result.output
    result = runner.invoke(main, ["worker", "--queues", "tpu"], env=env)
    assert result.exit_code == 2 and "unknown queue(s) ['tpu']" in result.output


def test_strict_workers_refuse_to_start_on_a_host_without_the_sandbox(tmp_path, monkeypatch):
    import grader.sandbox.wall as wall

    monkeypatch.setattr(wall, "bwrap_path", lambda: None)  # as on a host without bubblewrap
    env = {"ATTN_GRADER_INSTANCE_PATH": str(tmp_path), "ATTN_GRADER_SANDBOX": "strict"}
    runner = CliRunner()
    assert runner.invoke(main, ["db", "upgrade"], env=env).exit_code == 0
    for command in (["worker", "--queues", "cpu"], ["serve", "--port", "5998", "--no-demo"]):
        result = runner.invoke(main, command, env=env)
        assert result.exit_code == 1, result.output
        assert "ATTN_GRADER_SANDBOX=strict, but this host lacks" in result.output
        assert "bubblewrap" in result.output
