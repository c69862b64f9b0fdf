"""A student's data on request (`attn-grader data`): the export holds everything stored about
them and nobody else, the erasure removes what identifies them and leaves the course's
statistics as they were, both are recorded, and old access-log files are pruned."""
import json
import subprocess
import sys
import uuid
from datetime import date, timedelta

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select

from grader.cli import main
from service_support import ROOT, env_for, fake_grade
from web import access_files, create_app
from web.db import session_factory
from web.dispatch.worker import GradingWorker
from web.models import (DataRequest, QuizAnswer, QuizAttempt, Result, Submission, User)
from web.services.analytics import best_scores
from web.services.courses import default_course, find_assignment
from web.services.scores import scores_table


def _env(config):
    return {f"ATTN_GRADER_{k}": str(config[k]) for k in
            ("DATABASE_URL", "INSTANCE_PATH", "SECRET_KEY", "ACCESS_LOG_DIR")}


@pytest.fixture
def service(service):
    """The service with an "ada" of this test's own, deleted afterwards: on PostgreSQL the
    seeded people outlive a test, and an erasure must not touch theirs."""
    from sqlalchemy import delete

    from web.auth import issue_token
    from web.services.users import add_user

    with session_factory(service.engine)() as session:
        ada = add_user(session, f"ada.{uuid.uuid4().hex[:8]}@example.org", "student",
                       password="a passphrase")
        service.people = {**service.people, "ada": {"id": ada.id, "email": ada.email,
                                                     "token": issue_token(session, ada)}}
        session.commit()
    yield service
    with service.engine.begin() as conn:  # its rows go with it (ON DELETE CASCADE)
        conn.execute(delete(User).where(User.id == service.people["ada"]["id"]))


def _people_with_work(service):
    """ada (the fixture's) and bob submit through the API (access lines kept) and are graded;
    ada has an LMS identity, a written quiz answer and a program that printed something."""
    from web.lti.models import LtiPlatform, LtiUser

    service.config["ACCESS_LOG_DIR"] = str(service.tmp_path / "access")
    app = create_app(service.config)
    client = app.test_client()
    for who, code in (("ada", "print('ada was here')  # SCORE=7\n"), ("ada", "# SCORE=9\n"),
                      ("bob", "# SCORE=4\n")):
        r = client.post("/api/v1/submissions", json={"task": "sdpa", "code": code},
                        headers={"Authorization": f"Bearer {service.people[who]['token']}"})
        assert r.status_code == 202
    worker = GradingWorker(service.engine, service.config, grade_fn=_printing_grade, name="t")
    while worker.run_once():
        pass
    ada = service.people["ada"]["id"]
    with session_factory(service.engine)() as session:
        platform = LtiPlatform(name="LMS", issuer="https://lms.example", client_id="c1",
                               auth_login_url="https://lms.example/auth",
                               auth_token_url="https://lms.example/token",
                               key_set_url="https://lms.example/jwks", deployment_ids=["1"])
        session.add(platform)
        session.flush()
        keyed = {"issuer": platform.issuer} if hasattr(LtiUser, "issuer") else {}  # 0010 on
        session.add(LtiUser(platform_id=platform.id, sub="lms-ada", user_id=ada,
                            given_name="Ada", family_name="Lovelace", **keyed))
        quiz = find_assignment(session, "quiz")
        attempt = QuizAttempt(assignment_id=quiz.id, user_id=ada, status="submitted", score=1.0,
                              max_score=2.0)
        attempt.answers = [QuizAnswer(question_id="why", seed=1, answer="in my own words",
                                      points=1.0, max_points=1.0, correct=True),
                           QuizAnswer(question_id="pick", seed=2, answer=["b"], position=1,
                                      points=0.0, max_points=1.0, correct=False)]
        session.add(attempt)
        session.commit()
    return client


def _printing_grade(code, task, **kw):
    report = fake_grade(code, task, **kw)
    report["student_stdout"] = "ada was here\n" if "ada was here" in code else ""
    return report


def _statistics(service):
    with session_factory(service.engine)() as session:
        sdpa = find_assignment(session, "sdpa")
        rows = scores_table(session, default_course(session))
        return {"best": best_scores(session, sdpa),
                "scores": sorted(tuple(sorted((k, v) for k, v in row.items()
                                              if k not in ("email", "name", "user")))
                                 for row in rows),
                "results": session.scalar(select(func.count(Result.id))),
                "submissions": session.scalar(select(func.count(Submission.id))),
                "quiz": session.execute(select(QuizAnswer.question_id, QuizAnswer.points,
                                               QuizAnswer.correct).order_by(QuizAnswer.id)).all()}


def test_export_holds_everything_about_one_person_and_nobody_else(service):
    _people_with_work(service)
    runner, env = CliRunner(), _env(service.config)
    ADA = service.people["ada"]["email"]  # noqa: N806
    out = service.tmp_path / "ada.json"
    # In a process of its own, as an operator runs it: this test's process imported the LTI
    # plug-in's tables with the app, which hid an export that left them out.
    result = subprocess.run([sys.executable, "-m", "grader.cli", "data", "export", ADA, "-o",
                             str(out), "--reference", "DPO-17"], capture_output=True, text=True,
                            env=env_for(service.config, **env), cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (out.stat().st_mode & 0o777) == 0o600
    document = json.loads(out.read_text())
    ada = service.people["ada"]["id"]
    tables = document["tables"]
    assert document["subject"]["email"] == ADA
    assert [u["id"] for u in tables["users"]] == [ada] and "password_hash" not in tables["users"][0]
    assert tables["users"][0]["has_password"] is True
    assert [t["user_id"] for t in tables["api_tokens"]] == [ada]
    assert "token_hash" not in tables["api_tokens"][0]
    assert len(tables["submissions"]) == 2 and {s["user_id"] for s in tables["submissions"]} == {ada}
    assert any("ada was here" in s["code"] for s in tables["submissions"])
    assert len(tables["results"]) == 2 and len(tables["grading_jobs"]) == 2
    assert len(tables["check_results"]) == 4
    assert tables["lti_users"][0]["family_name"] == "Lovelace"
    assert {a["answer"] if isinstance(a["answer"], str) else tuple(a["answer"])
            for a in tables["quiz_answers"]} == {"in my own words", ("b",)}
    lines = document["access_log"]
    assert len(lines) == 2 and {line["user_id"] for line in lines} == {ada}
    assert {line["path"] for line in lines} == {"/api/v1/submissions"}
    assert "bob@example.org" not in out.read_text()
    with session_factory(service.engine)() as session:
        record = session.scalar(select(DataRequest).where(DataRequest.user_id == ada))
        assert (record.kind, record.user_id, record.subject, record.reference) == \
            ("export", ada, ADA, "DPO-17")
        assert record.counts["submissions"] == 2 and record.counts["access_log_lines"] == 2
    listed = runner.invoke(main, ["data", "requests"], env=env).output
    assert "export" in listed and ADA in listed and "DPO-17" in listed


def test_erasure_removes_what_identifies_and_keeps_the_statistics(service):
    client = _people_with_work(service)
    runner, env = CliRunner(), _env(service.config)
    ADA = service.people["ada"]["email"]  # noqa: N806
    ada = service.people["ada"]["id"]
    assert runner.invoke(main, ["data", "export", ADA, "-o",
                                str(service.tmp_path / "x.json")], env=env).exit_code == 0
    before = _statistics(service)
    directory = service.config["ACCESS_LOG_DIR"]
    lines_before = sum(len(p.read_text().splitlines()) for _d, p in access_files.files(directory))

    declined = runner.invoke(main, ["data", "erase", ADA], input="n\n", env=env)
    assert "nothing erased" in declined.output
    erased = runner.invoke(main, ["data", "erase", ADA, "--yes"], env=env)
    assert erased.exit_code == 0, erased.output
    assert f"erased user {ada}" in erased.output

    assert _statistics(service) == before  # every score, count and quiz point as before
    with session_factory(service.engine)() as session:
        user = session.get(User, ada)
        assert user.email == f"erased-{ada}@erased.invalid" and user.name == ""
        assert user.password_hash is None and not user.is_active and not user.tokens
        subs = session.scalars(select(Submission).where(Submission.user_id == ada)).all()
        assert [s.code for s in subs] == ["", ""] and all(s.score is not None for s in subs)
        reports = [r.report for s in subs for r in s.results]
        assert all("student_stdout" not in r for r in reports)
        answers = session.scalars(select(QuizAnswer).order_by(QuizAnswer.id)).all()
        assert [a.answer for a in answers] == ["", ["b"]]  # the written text goes, choices stay
        from web.lti.models import LtiUser
        assert session.scalar(select(func.count(LtiUser.id))) == 0
        records = session.scalars(select(DataRequest).where(DataRequest.user_id == ada)
                                  .order_by(DataRequest.id)).all()
        assert [(r.kind, r.subject) for r in records] == [("export", f"user {ada}"),
                                                          ("erasure", f"user {ada}")]
        assert records[1].counts["api_tokens deleted"] == 1
    # the access lines stay (traffic adds up) without the person in them
    assert access_files.lines_for_user(directory, ada) == []
    assert sum(len(p.read_text().splitlines()) for _d, p in access_files.files(directory)) \
        == lines_before
    assert client.get("/api/v1/submissions", headers={
        "Authorization": f"Bearer {service.people['ada']['token']}"}).status_code == 401
    text = "".join(p.read_text() for _d, p in access_files.files(directory))
    assert ADA not in text
    again = runner.invoke(main, ["data", "export", ADA], env=env)
    assert again.exit_code == 1 and f"no user {ADA}" in again.output


def test_access_log_files_older_than_the_retention_are_pruned(tmp_path, service):
    directory = tmp_path / "access"
    directory.mkdir()
    today = date.today()
    for age in (0, 1, 30, 31, 400):
        access_files.day_file(directory, today - timedelta(days=age)).write_text("{}\n")
    removed = access_files.prune(directory, 30, today=today)
    assert sorted(p.name for p in removed) == sorted(
        access_files.day_file(directory, today - timedelta(days=a)).name for a in (31, 400))
    env = {**_env({**service.config, "ACCESS_LOG_DIR": str(directory)}),
           "ATTN_GRADER_ACCESS_LOG_RETENTION_DAYS": "0"}
    result = CliRunner().invoke(main, ["data", "prune-logs", "--days", "1"], env=env)
    assert result.exit_code == 0 and "removed 1 file(s) older than 1 day(s)" in result.output
    unset = CliRunner().invoke(main, ["data", "prune-logs"], env=_env(
        {**service.config, "ACCESS_LOG_DIR": ""}))
    assert unset.exit_code == 1 and "ACCESS_LOG_DIR is unset" in unset.output
