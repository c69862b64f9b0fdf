"""LTI administration (the instructor's page and ``attn-grader lti``) and which score
changes queue a passback. No LMS here; ``test_lti.py`` talks to one."""
from __future__ import annotations

import json

from click.testing import CliRunner

from grader.cli import main
from pages_support import ada, db_session, env, grade_queued, prof  # noqa: F401 (fixtures)


def _cli_env(env):
    return {f"ATTN_GRADER_{k}": str(env.config[k]) for k in
            ("DATABASE_URL", "INSTANCE_PATH", "SECRET_KEY")}


REGISTRATION = ["--issuer", "https://canvas.example.edu", "--client-id", "1000000000001",
                "--login-url", "https://sso.canvaslms.example.edu/api/lti/authorize_redirect",
                "--token-url", "https://sso.canvaslms.example.edu/login/oauth2/token",
                "--jwks-url", "https://sso.canvaslms.example.edu/api/lti/security/jwks"]


def test_cli_registers_lists_and_removes_platforms(env):
    runner = CliRunner()
    cli_env = _cli_env(env)
    added = runner.invoke(main, ["lti", "platforms", "add", "--name", "Canvas", *REGISTRATION,
                                 "--deployment", "12:abc"], env=cli_env)
    assert added.exit_code == 0, added.output
    nowhere = runner.invoke(main, ["lti", "platforms", "add", *REGISTRATION[:2], "--client-id",
                                   "3", *REGISTRATION[4:], "--course", "nope"], env=cli_env)
    assert nowhere.exit_code == 1 and "no course 'nope'" in nowhere.output
    again = runner.invoke(main, ["lti", "platforms", "add", *REGISTRATION], env=cli_env)
    assert again.exit_code == 1 and "already registered" in again.output
    plain = runner.invoke(main, ["lti", "platforms", "add", *REGISTRATION[:2], "--client-id",
                                 "2", "--login-url", "http://lms/auth", "--token-url", "x",
                                 "--jwks-url", "y"], env=cli_env)
    assert plain.exit_code == 1 and "auth_login_url: 'http://lms/auth' is not an https URL" \
        in plain.output

    listed = json.loads(runner.invoke(main, ["lti", "platforms", "list", "--json"],
                                      env=cli_env).output)
    assert [(p["name"], p["client_id"], p["deployment_ids"]) for p in listed] == \
        [("Canvas", "1000000000001", ["12:abc"])]
    assert runner.invoke(main, ["lti", "platforms", "deployments", "Canvas", "1", "2"],
                         env=cli_env).exit_code == 0
    from web.models import Course
    with db_session(env) as session:
        slug = session.query(Course.slug).first()[0]
    scoped = runner.invoke(main, ["lti", "platforms", "course", "Canvas", slug], env=cli_env)
    assert scoped.exit_code == 0 and f"launches join {slug}" in scoped.output
    assert f"course={slug}" in runner.invoke(main, ["lti", "platforms", "list"], env=cli_env).output
    unscoped = runner.invoke(main, ["lti", "platforms", "course", "Canvas"], env=cli_env)
    assert "launches join the default course" in unscoped.output
    assert runner.invoke(main, ["lti", "platforms", "course", "Canvas", "nope"],
                         env=cli_env).exit_code == 1
    urls = runner.invoke(main, ["lti", "urls", "--base-url", "https://grader.example.edu/"],
                         env=cli_env).output
    assert "https://grader.example.edu/lti/login" in urls
    assert "https://grader.example.edu/lti/jwks" in urls
    keys = json.loads(runner.invoke(main, ["lti", "jwks"], env=cli_env).output)["keys"]
    rotated = json.loads(runner.invoke(main, ["lti", "jwks", "--rotate"], env=cli_env).output)
    assert len(rotated["keys"]) == 2 and rotated["keys"][1]["kid"] == keys[0]["kid"]
    gone = runner.invoke(main, ["lti", "platforms", "remove", "Canvas", "--yes"], env=cli_env)
    assert gone.exit_code == 0
    missing = runner.invoke(main, ["lti", "platforms", "remove", "Canvas", "--yes"], env=cli_env)
    assert missing.exit_code == 1 and "no LTI platform 'Canvas'" in missing.output


def test_instructor_page_registers_a_platform_and_shows_the_tool_urls(env, prof, ada):
    page = prof.get("/instructor/lti")
    assert page.status_code == 200
    assert b"http://localhost/lti/login" in page.data and b"http://localhost/lti/jwks" in page.data
    form = {"new-issuer": "https://moodle.example.edu", "new-client_id": "abc123",
            "new-auth_login_url": "https://moodle.example.edu/mod/lti/auth.php",
            "new-auth_token_url": "https://moodle.example.edu/mod/lti/token.php",
            "new-key_set_url": "https://moodle.example.edu/mod/lti/certs.php",
            "new-deployment_ids": "7"}
    assert prof.post("/instructor/lti", data=form).status_code == 302
    listing = prof.get("/instructor/lti").data
    assert b"https://moodle.example.edu" in listing and b'value="7"' in listing
    duplicate = prof.post("/instructor/lti", data=form, follow_redirects=True)
    assert b"already registered" in duplicate.data
    assert ada.get("/instructor/lti").status_code == 403
    assert ada.post("/instructor/lti/platforms/1/remove").status_code == 403
    prof.post("/instructor/lti/platforms/1/deployments", data={"deployment_ids": "7, 8"})
    assert b'value="7 8"' in prof.get("/instructor/lti").data
    gone = prof.post("/instructor/lti/platforms/1/remove", follow_redirects=True)
    assert b"Platform removed" in gone.data and b"moodle.example.edu" not in gone.data


def _linked_student(env, kind="task"):
    """Ada as the LMS user 'lms-ada' on a link to sdpa (or the quiz) with score passback."""
    from web.lti.models import LtiResourceLink, LtiUser
    from web.lti.passback import SCORE_SCOPE
    from web.lti.platforms import add_platform
    from web.models import User
    from web.services.courses import find_assignment

    with db_session(env) as session:
        platform = add_platform(session, issuer="https://lms.example.edu", client_id="c",
                                auth_login_url="https://lms.example.edu/a",
                                auth_token_url="https://lms.example.edu/t",
                                key_set_url="https://lms.example.edu/k")
        user = session.query(User).filter_by(email="ada@example.org").one()
        assignment = find_assignment(session, "sdpa" if kind == "task" else "quiz")
        session.add(LtiUser(issuer=platform.issuer, platform=platform, sub="lms-ada", user=user))
        session.add(LtiResourceLink(platform=platform, resource_link_id="rl", deployment_id="d",
                                    assignment=assignment,
                                    ags={"scope": [SCORE_SCOPE],
                                         "lineitem": "https://lms.example.edu/li/1"}))
        session.commit()
        return user.id


def test_grading_and_an_instructor_override_queue_the_new_best_score(env, ada, prof):
    from web.lti.models import LtiScoreSync
    from web.models import Submission

    _linked_student(env)
    ada.post("/tasks/sdpa", data={"code": "# SCORE=6\n"})
    with db_session(env) as session:
        assert session.query(LtiScoreSync).count() == 0  # queued, not graded yet
    grade_queued(env)
    with db_session(env) as session:
        row = session.query(LtiScoreSync).one()
        assert (row.score_given, row.score_maximum, row.version, row.lti_sub) == \
            (6.0, 10.0, 1, "lms-ada")
        first = row.score_timestamp
        sub_id = session.query(Submission.id).scalar()
    override = prof.post(f"/instructor/submissions/{sub_id}/override",
                         data={"points": "9.5", "comment": "partial credit"})
    assert override.status_code in (200, 302)
    with db_session(env) as session:
        row = session.query(LtiScoreSync).one()
        assert (row.score_given, row.version) == (9.5, 2) and row.score_timestamp > first


def test_a_submitted_quiz_attempt_queues_its_score(env, ada):
    from web.lti.models import LtiScoreSync
    from web.models import QuizAttempt

    _linked_student(env, kind="quiz")
    ada.post("/quiz/quiz/start")
    with db_session(env) as session:
        assert session.query(QuizAttempt).count() == 1
        assert session.query(LtiScoreSync).count() == 0  # open attempts are not scores
    ada.post("/quiz/quiz/submit", data={"confirmed": "yes"})
    with db_session(env) as session:
        attempt = session.query(QuizAttempt).one()
        row = session.query(LtiScoreSync).one()
        assert attempt.status == "submitted"
        assert (row.score_given, row.score_maximum) == (attempt.score, attempt.max_score)


def test_an_answered_quiz_attempt_is_passed_back_when_submitted(env, ada):
    """The attempt's score is totalled while it is open, so submitting it may not change
    ``score``; the submission itself must queue it (a Moodle run showed 1/27 never sent)."""
    from questions.answers import solution
    from questions.model import load_bank
    from questions.variants import variant_seed
    from web.config import quiz_secret
    from web.lti.models import LtiScoreSync
    from web.models import QuizAttempt

    user_id = _linked_student(env, kind="quiz")
    qid = "head-dimension"
    value = solution(load_bank().get(qid),
                     variant_seed(f"user:{user_id}", qid, quiz_secret(env.config)))["value"]
    ada.post("/quiz/quiz/start")
    ada.post(f"/quiz/quiz/questions/{qid}", data={f"q-{qid}-number": str(value)})
    with db_session(env) as session:
        attempt = session.query(QuizAttempt).one()
        assert attempt.status == "open" and attempt.score == 1  # totalled while open
        assert session.query(LtiScoreSync).count() == 0
    ada.post("/quiz/quiz/submit", data={"confirmed": "yes"})  # the others left unanswered
    with db_session(env) as session:
        attempt = session.query(QuizAttempt).one()
        row = session.query(LtiScoreSync).one()
        assert attempt.status == "submitted"
        assert (row.score_given, row.score_maximum) == (1.0, attempt.max_score)
        assert row.sent_version < row.version  # waiting to be sent, not shown as "sent"


def test_the_lti_tables_import_first_without_a_cycle():
    """``attn-grader lti roster`` imports web.lti.models before web.models."""
    import subprocess
    import sys
    from pathlib import Path

    done = subprocess.run([sys.executable, "-c", "import web.lti.models as m; "
                           "print(len(m.Base.metadata.tables))"],
                          cwd=Path(__file__).resolve().parent.parent, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) >= 19
