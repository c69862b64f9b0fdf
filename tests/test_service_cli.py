"""The service's admin commands: db, users, regrade, and serve's refusal on an old schema."""
import threading
from contextlib import contextmanager

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from grader.cli import main
from service_support import fake_grade
from web.auth import user_for_token
from web.db import session_factory
from web.dispatch.worker import GradingWorker
from web.models import GradingJob, ManualGrade, Submission, User
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

    head = head_revision()  # the newest migration, whichever it is
    env = {"ATTN_GRADER_INSTANCE_PATH": str(tmp_path)}
    runner = CliRunner()
    result = runner.invoke(main, ["db", "current"], env=env)
    assert f"database: (empty); code: {head}" in result.output
    assert "NOT usable: has no tables yet" in result.output
    assert "Run `attn-grader db upgrade`" in result.output
    result = runner.invoke(main, ["serve", "--port", "5999"], env=env)
    assert result.exit_code == 1 and "Run `attn-grader db upgrade`" in result.output
    result = runner.invoke(main, ["db", "upgrade"], env=env)
    assert result.exit_code == 0 and f"is at revision {head}" in result.output
    assert f"database: {head}; code: {head}" in \
        runner.invoke(main, ["db", "current"], env=env).output


def test_serve_on_a_port_in_use_names_both_ways_to_choose_another(tmp_path):
    import socket

    env = {"ATTN_GRADER_INSTANCE_PATH": str(tmp_path)}
    runner = CliRunner()
    assert runner.invoke(main, ["db", "upgrade"], env=env).exit_code == 0
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = runner.invoke(main, ["serve", "--port", str(port), "--workers", "0", "--no-demo"],
                               env=env)
    assert result.exit_code == 1 and f"cannot listen on 127.0.0.1:{port}" in result.output
    assert "--port" in result.output and "make run PORT=" in result.output  # `make run` users too


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


def _graded(service, codes: dict) -> dict:
    """Submit ``{email: code}`` for sdpa, grade them with ``fake_grade``; {email: submission id}."""
    ids = {}
    with session_factory(service.engine)() as session:
        for email, code in codes.items():
            user = session.scalar(select(User).where(User.email == email))
            ids[email] = submit(session, user, find_assignment(session, "sdpa"), code).id
    worker = GradingWorker(service.engine, service.config, grade_fn=fake_grade)
    while worker.run_once():
        pass
    return ids


@contextmanager
def workers_running(service, grade_fn, count: int = 2):
    """``count`` in-process grading workers on the cpu queue, as ``attn-grader worker`` runs them."""
    stop = threading.Event()
    threads = [threading.Thread(target=GradingWorker(service.engine, service.config, grade_fn=grade_fn,
                                                     name=f"in-process-{i}").run_polling,
                                args=(("cpu",), stop), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)


@pytest.mark.parametrize("service", ["sqlite"], indirect=True)
def test_regrade_queues_jobs_the_workers_grade_and_shows_the_changes(service):
    ids = _graded(service, {"ada@example.org": "# SCORE=7\n", "bob@example.org": "# SCORE=10\n",
                            "prof@example.org": "# SCORE=3\n"})
    with session_factory(service.engine)() as session:  # the instructor set their own score by hand
        prof = session.scalar(select(User).where(User.role == "instructor"))
        session.add(ManualGrade(submission_id=ids["prof@example.org"], grader_id=prof.id,
                                points=6.0, comment="hand-checked"))
        session.get(Submission, ids["prof@example.org"]).score = 6.0
        session.commit()
    runner, env = CliRunner(), _env(service.config)

    preview = runner.invoke(main, ["regrade", "--assignment", "sdpa", "--dry-run"], env=env)
    assert preview.exit_code == 0, preview.output
    assert "3 submission(s), 3 to queue" in preview.output
    assert any("prof@example.org" in line and line.endswith("queue  (override kept)")
               for line in preview.output.splitlines())
    assert "dry run: nothing queued" in preview.output
    declined = runner.invoke(main, ["regrade", "--assignment", "sdpa"], input="n\n", env=env)
    assert "nothing queued" in declined.output
    with session_factory(service.engine)() as session:
        assert {job.status for job in session.scalars(select(GradingJob))} == {"done"}

    with workers_running(service, better_grader):
        applied = runner.invoke(main, ["regrade", "--assignment", "sdpa", "--yes"], env=env)
    assert applied.exit_code == 0, applied.output
    assert "queued 3 regrade job(s)" in applied.output
    lines = applied.output.splitlines()
    assert any("ada@example.org" in l and "7.00 ->    8.00" in l and "fake-1.0 -> fake-2.0  done  *" in l
               for l in lines)
    assert any("bob@example.org" in l and "10.00 ->   10.00" in l and l.endswith("done")
               for l in lines)
    assert any("prof@example.org" in l and "6.00 ->    6.00" in l for l in lines)
    with session_factory(service.engine)() as session:
        ada = session.get(Submission, ids["ada@example.org"])
        assert (ada.score, ada.grader_version) == (8.0, "fake-2.0")
        assert [(r.kind, r.score, r.grader_version, r.worker.startswith("in-process") if r.kind ==
                 "regrade" else None) for r in ada.results] == \
            [("grade", 7.0, "fake-1.0", None), ("regrade", 8.0, "fake-2.0", True)]
        own = session.get(Submission, ids["prof@example.org"])
        assert own.score == 6.0 and own.result.score == 4.0  # the override stands
    unknown = runner.invoke(main, ["regrade", "--assignment", "nope"], env=env)
    assert unknown.exit_code == 1 and "no task assignment 'nope'" in unknown.output


@pytest.mark.parametrize("service", ["sqlite"], indirect=True)
def test_regrade_of_one_submission_skips_one_already_queued(service):
    ids = _graded(service, {"ada@example.org": "# SCORE=7\n"})
    runner, env = CliRunner(), _env(service.config)
    first = runner.invoke(main, ["regrade", "--submission", str(ids["ada@example.org"]), "--yes",
                                 "--no-wait"], env=env)
    assert "queued 1 regrade job(s)" in first.output, first.output
    again = runner.invoke(main, ["regrade", "--submission", str(ids["ada@example.org"]), "--yes"],
                          env=env)
    assert f"skipped: submission {ids['ada@example.org']} is already queued" in again.output
    assert "nothing to queue" in again.output
    both = runner.invoke(main, ["regrade"], env=env)
    assert both.exit_code == 2 and "give --assignment or --submission" in both.output


@pytest.mark.parametrize("service", ["sqlite"], indirect=True)
def test_a_worker_dying_mid_regrade_leaves_the_job_graded_or_failed(service):
    from web.dispatch import claim as claims
    from web.models import HOST_LOST
    from web.services.grading import reconcile_jobs as reconcile
    from web.services.grading import record_job_result, report_to_dict
    from web.services.regrade import RETRY_BUDGET, queue_regrades

    ids = _graded(service, {"ada@example.org": "# SCORE=7\n", "bob@example.org": "# SCORE=5\n"})
    ada, bob = ids["ada@example.org"], ids["bob@example.org"]
    with session_factory(service.engine)() as session:
        queue_regrades(session, [session.get(Submission, ada)])
    # A worker claims the regrade and dies: its lease (0 s here) runs out, nothing renews it.
    doomed = claims.claim_next(service.engine, "doomed", ("cpu",), lease_seconds=0.0)
    assert (doomed.submission_id, doomed.attempt) == (ada, 2)
    rescuer = GradingWorker(service.engine, service.config, grade_fn=better_grader, name="rescuer")
    assert rescuer.run_once() == "done"
    late = report_to_dict(fake_grade("# SCORE=1\n", "sdpa"))
    assert not claims.finish(service.engine, doomed, late, record_job_result)  # fenced: the dead attempt is stale
    with session_factory(service.engine)() as session:
        sub = session.get(Submission, ada)
        assert (sub.job.status, sub.job.attempts, sub.job.worker) == ("done", 3, "rescuer")
        assert [(r.kind, r.score) for r in sub.results] == [("grade", 7.0), ("regrade", 8.0)]

    with session_factory(service.engine)() as session:
        queue_regrades(session, [session.get(Submission, bob)])
    for _ in range(RETRY_BUDGET):  # every claim of its budget dies
        assert claims.claim_next(service.engine, "doomed", ("cpu",), lease_seconds=0.0)
    assert claims.claim_next(service.engine, "doomed", ("cpu",)) is None  # no claims left
    report = reconcile(service.engine)
    with session_factory(service.engine)() as session:
        sub = session.get(Submission, bob)
        assert report.failed == [sub.job.id]
        assert (sub.status, sub.job.status) == ("failed", "failed")
        assert sub.job.error.startswith(HOST_LOST)
        assert [(r.kind, r.score) for r in sub.results] == [("grade", 5.0)]  # on record still


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


def test_the_start_up_line_says_which_isolation_and_why(monkeypatch):
    import grader.sandbox.wall as wall
    from grader.sandbox.backends import isolation_summary

    bwrap = "bubblewrap for the outer wall (apt-get install bubblewrap)"
    root = "root privileges for the grader (per-run uids, mounts and cgroups; ...)"
    hosts = {"full": lambda wall=True: [], "no bwrap": lambda wall=True: [bwrap] if wall else [],
             "no root": lambda wall=True: [root] + ([bwrap] if wall else [])}
    said = {}
    for host, problems in hosts.items():
        monkeypatch.setattr(wall, "strict_problems", problems)
        said[host] = {level: isolation_summary(level) for level in ("auto", "strict", "none")}
    assert said["full"]["auto"].startswith("sandbox: auto → strict (bubblewrap wall, namespaces, cgroup, seccomp")
    assert said["full"]["strict"].startswith("sandbox: strict (bubblewrap wall")
    assert said["no bwrap"]["auto"] == ("sandbox: auto → namespaces, cgroup, seccomp and a uid per run, without "
                                        f"the bubblewrap wall; missing: {bwrap}")
    assert said["no root"]["auto"].startswith("sandbox: auto → a plain subprocess with resource limits only")
    assert said["no root"]["auto"].endswith(f"missing: {root}; {bwrap}")
    assert said["no root"]["strict"] == f"sandbox: strict is unavailable here, missing: {root}; {bwrap}"
    assert all(s["none"].startswith("sandbox: none → a plain subprocess, no isolation") for s in said.values())
    assert all("\n" not in line for s in said.values() for line in s.values())


@pytest.mark.parametrize("service", ["sqlite"], indirect=True)
def test_regrade_selects_by_the_grader_version_that_scored_each_submission(service):
    """O4: after a rolling upgrade some results come from the old grader; one command finds
    exactly those, and its dry run lists only them."""
    ids = _graded(service, {"ada@example.org": "# SCORE=7\n", "bob@example.org": "# SCORE=9\n",
                            "prof@example.org": "# SCORE=3\n"})
    runner, env = CliRunner(), _env(service.config)
    with workers_running(service, better_grader, count=1):  # bob's is graded by "the new one"
        moved = runner.invoke(main, ["regrade", "--submission", str(ids["bob@example.org"]),
                                     "--yes"], env=env)
    assert moved.exit_code == 0, moved.output

    old = runner.invoke(main, ["regrade", "--assignment", "sdpa", "--grader-version",
                               "fake-1.0", "--dry-run"], env=env)
    assert old.exit_code == 0, old.output
    assert "graded last by: fake-1.0 2, fake-2.0 1" in old.output
    assert "2 submission(s), 2 to queue" in old.output
    listed = [line.split()[1] for line in old.output.splitlines() if "@example.org" in line]
    assert sorted(listed) == ["ada@example.org", "prof@example.org"]
    same = runner.invoke(main, ["regrade", "--assignment", "sdpa", "--not-grader-version",
                                "fake-2.0", "--dry-run"], env=env)
    assert "2 submission(s), 2 to queue" in same.output and "bob@example.org" not in same.output
    none = runner.invoke(main, ["regrade", "--assignment", "sdpa", "--grader-version", "9.9",
                                "--dry-run"], env=env)
    assert "0 submission(s), 0 to queue" in none.output
    current = runner.invoke(main, ["regrade", "--assignment", "sdpa", "--not-grader-version",
                                   "current", "--dry-run"], env=env)
    assert current.exit_code == 2 and "GRADE_FUNCTION" in current.output  # the fake grader's
    one = runner.invoke(main, ["regrade", "--submission", "1", "--grader-version", "x"], env=env)
    assert one.exit_code == 2
