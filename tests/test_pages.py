"""The pages through Flask's test client: forms, results, quizzes, instructor views, escaping."""
from __future__ import annotations

import io
import re

import pytest

from pages_support import ada, bob, db_session, env, grade_queued, prof, sign_in  # noqa: F401

XSS = "<script>alert('x')</script>"


def _submission_id(response) -> int:
    assert response.status_code == 302, response.get_data(as_text=True)[:500]
    return int(re.search(r"/submissions/(\d+)$", response.location).group(1))


def _report_with_pictures(code, task, **_):
    """A grader report whose failing checks carry heatmaps and the variance table."""
    weights = [[0.5, 0.5], [0.25, 0.75]]
    return {
        "task": task, "score": 3.0, "max_score": 10.0, "passed": False, "error": None,
        "grader_version": "pictures-1", "sandbox": "none", "warnings": [], "timings": {},
        "checks": [
            {"id": "mask.bool", "passed": False, "points": 0.0, "max_points": 4.0,
             "message": f"mask ignored {XSS}",
             "details": {"case": "L=2, S=2", "max_error": 0.5, "worst_index": [0, 1],
                         "weights_submission": weights, "weights_reference": [[1.0, 0.0], [0.5, 0.5]],
                         "custom_note": XSS}},
            {"id": "scale.default", "passed": False, "points": 3.0, "max_points": 6.0,
             "message": "no scaling",
             "details": {"variance_by_dk": [{"d_k": d, "variance": float(d), "expected": 1.0}
                                            for d in (8, 16, 32, 64)]}},
        ],
    }


# ---- sign up / sign in -------------------------------------------------------------------

def test_sign_up_signs_in_and_enrols(env):
    client = env.app.test_client()
    page = client.get("/sign-up").get_data(as_text=True)
    assert 'name="confirm"' in page
    response = client.post("/sign-up", data={"name": "Cleo", "email": "Cleo@Example.org",
                                              "password": "attention-heads-8",
                                              "confirm": "attention-heads-8"})
    assert response.status_code == 302 and response.location == "/"
    home = client.get("/").get_data(as_text=True)
    assert "Welcome, Cleo" in home and "Scaled dot-product attention" in home
    assert "cleo@example.org" in home  # stored lower-case


def test_sign_up_explains_what_is_wrong(env):
    client = env.app.test_client()
    page = client.post("/sign-up", data={"name": "A", "email": "ada@example.org",
                                         "password": "password123", "confirm": "password124"}
                       ).get_data(as_text=True)
    assert "the passwords differ" in page
    assert "common passwords" in page
    page = client.post("/sign-up", data={"name": "A", "email": "ada@example.org",
                                         "password": "long enough pass", "confirm": "long enough pass"}
                       ).get_data(as_text=True)
    assert "already exists" in page


def test_wrong_password_and_sign_out(env):
    client = env.app.test_client()
    page = sign_in(client, "ada@example.org", "nope nope").get_data(as_text=True)
    assert "Wrong email or password." in page
    assert sign_in(client, "ada@example.org").location == "/"
    assert client.get("/").status_code == 200
    assert client.post("/sign-out").location == "/sign-in"
    assert client.get("/").status_code == 302


def test_instructor_lands_on_scores(env):
    client = env.app.test_client()
    assert sign_in(client, "prof@example.org").location == "/instructor/"


# ---- tasks and results -------------------------------------------------------------------

def test_task_page_has_spec_starter_and_editor(env, ada):
    page = ada.get("/tasks/sdpa").get_data(as_text=True)
    assert "<h1" in page and "scaled_dot_product_attention" in page
    assert 'class="code-input' in page and 'enctype="multipart/form-data"' in page
    assert "codemirror.js" in page
    starter = ada.get("/tasks/sdpa/starter.py")
    assert starter.headers["Content-Disposition"] == "attachment; filename=sdpa.py"
    assert b"def scaled_dot_product_attention" in starter.data
    assert ada.get("/tasks/nope").status_code == 404
    assert ada.get("/tasks/quiz").status_code == 404


def test_submit_then_the_result_page_fills_in(env, ada):
    sid = _submission_id(ada.post("/tasks/sdpa", data={"code": "x = 1\n# SCORE=4\n"}))
    page = ada.get(f"/submissions/{sid}").get_data(as_text=True)
    assert "queued" in page and 'http-equiv="refresh"' in page and "js/status.js" in page
    status = ada.get(f"/submissions/{sid}/status.json").get_json()
    assert status["status"] == "queued" and status["finished"] is False

    assert grade_queued(env) == 1
    status = ada.get(f"/submissions/{sid}/status.json").get_json()
    assert status == {**status, "status": "done", "finished": True, "score": 4.0}
    page = ada.get(f"/submissions/{sid}").get_data(as_text=True)
    assert "4 / 10" in page and "js/status.js" not in page
    assert "max abs error 0.3 at [0, 1]" in page  # the failing check's message
    assert "1 of 2 checks failed" in page

    # a second attempt shows what changed since the first
    sid2 = _submission_id(ada.post("/tasks/sdpa", data={"code": "x = 2\n# SCORE=10\n"}))
    grade_queued(env)
    page = ada.get(f"/submissions/{sid2}").get_data(as_text=True)
    assert "Changes since attempt 1" in page and "<h1>Attempt 2 " in page
    assert "x = 1" in re.sub(r"<[^>]+>", "", page) and "all checks passed" in page
    home = ada.get("/").get_data(as_text=True)
    assert "10 / 10" in home and "(2 used)" in home


def test_upload_a_file_instead_of_typing(env, ada):
    data = {"code": "", "upload": (io.BytesIO(b"y = 3\n# SCORE=7\n"), "mine.py")}
    sid = _submission_id(ada.post("/tasks/sdpa", data=data, content_type="multipart/form-data"))
    with db_session(env) as session:
        from web.models import Submission
        sub = session.get(Submission, sid)
        assert sub.filename == "mine.py" and "SCORE=7" in sub.code
    bad = {"code": "", "upload": (io.BytesIO(b"hello"), "notes.txt")}
    page = ada.post("/tasks/sdpa", data=bad, content_type="multipart/form-data").get_data(as_text=True)
    assert "upload a Python file (.py)" in page
    page = ada.post("/tasks/sdpa", data={"code": "   "}).get_data(as_text=True)
    assert "paste your code or choose a file" in page


def test_rejected_submissions_say_why(env, ada):
    from web.models import Assignment
    with db_session(env) as session:
        task = session.query(Assignment).filter_by(slug="sdpa").one()
        task.max_attempts = 1
        session.commit()
    _submission_id(ada.post("/tasks/sdpa", data={"code": "a = 1\n"}))
    page = ada.post("/tasks/sdpa", data={"code": "a = 2\n"}, follow_redirects=True).get_data(as_text=True)
    assert "Not submitted: no attempts left: 1 of 1 used" in page
    assert "Submissions are closed: no attempts left" in page


def test_result_pictures_and_escaped_details(env, ada):
    sid = _submission_id(ada.post("/tasks/sdpa", data={"code": "z = 0\n"}))
    grade_queued(env, _report_with_pictures)
    page = ada.get(f"/submissions/{sid}").get_data(as_text=True)
    assert XSS not in page and "&lt;script&gt;" in page
    assert f"/submissions/{sid}/checks/0/weights.svg" in page
    assert f"/submissions/{sid}/checks/1/variance.svg" in page
    heatmap = ada.get(f"/submissions/{sid}/checks/0/weights.svg")
    assert heatmap.mimetype == "image/svg+xml" and b"your weights" in heatmap.data
    assert b"reference" in heatmap.data
    variance = ada.get(f"/submissions/{sid}/checks/1/variance.svg")
    assert b"expected" in variance.data and b"d_k" in variance.data
    assert ada.get(f"/submissions/{sid}/checks/1/weights.svg").status_code == 404
    assert ada.get(f"/submissions/{sid}/checks/9/weights.svg").status_code == 404


def test_score_only_feedback_hides_checks_and_pictures(env, ada):
    from web.models import Assignment
    with db_session(env) as session:
        session.query(Assignment).filter_by(slug="sdpa").one().feedback = "score"
        session.commit()
    sid = _submission_id(ada.post("/tasks/sdpa", data={"code": "z = 0\n"}))
    grade_queued(env, _report_with_pictures)
    page = ada.get(f"/submissions/{sid}").get_data(as_text=True)
    assert "3 / 10" in page and "mask ignored" not in page
    assert "shows only the score" in page
    assert ada.get(f"/submissions/{sid}/checks/0/weights.svg").status_code == 404


# ---- instructor views --------------------------------------------------------------------

def test_instructor_submission_page_escapes_code_and_regrades(env, ada, prof):
    code = f"# {XSS}\ndef f():\n    return '</pre><b>bold</b>'\n# SCORE=5\n"
    sid = _submission_id(ada.post("/tasks/sdpa", data={"code": code}))
    grade_queued(env)
    page = prof.get(f"/instructor/submissions/{sid}").get_data(as_text=True)
    assert XSS not in page and "<b>bold</b>" not in page
    assert "&lt;script&gt;" in page and 'class="highlight"' in page
    response = prof.post(f"/instructor/submissions/{sid}/regrade")
    assert response.location == f"/instructor/submissions/{sid}"  # back where they were
    assert prof.get(f"/submissions/{sid}/status.json").get_json()["status"] == "queued"
    twice = prof.post(f"/instructor/submissions/{sid}/regrade", follow_redirects=True)
    assert f"Not regraded: submission {sid} is already queued." in twice.get_data(as_text=True)
    assert grade_queued(env) == 1
    page = prof.get(f"/instructor/submissions/{sid}").get_data(as_text=True)
    assert "Grading runs" in page  # the first result stays on record
    again = prof.post(f"/instructor/submissions/{sid}/override",
                      data={"points": "9", "comment": "hand-checked"}, follow_redirects=True)
    assert "Score overridden." in again.get_data(as_text=True)
    assert prof.get(f"/submissions/{sid}/status.json").get_json()["score"] == 9.0


def test_overview_matrix_sorts_filters_and_escapes_names(env, ada, bob, prof):
    from web.models import User
    with db_session(env) as session:
        session.query(User).filter_by(email="bob@example.org").one().name = XSS
        session.commit()
    ada.post("/tasks/sdpa", data={"code": "a = 1\n# SCORE=4\n"})
    bob.post("/tasks/sdpa", data={"code": "b = 1\n# SCORE=10\n"})
    grade_queued(env)
    page = prof.get("/instructor/?sort=sdpa&dir=desc").get_data(as_text=True)
    assert XSS not in page and "&lt;script&gt;" in page
    assert page.index("bob@example.org") < page.index("ada@example.org")
    page = prof.get("/instructor/?sort=sdpa&dir=asc").get_data(as_text=True)
    assert page.index("ada@example.org") < page.index("bob@example.org")
    page = prof.get("/instructor/?q=ADA").get_data(as_text=True)
    assert "ada@example.org" in page and "bob@example.org" not in page
    # The average weighs each assignment equally and counts what is scored or due: 4/10 on the
    # one task tried, the others (no deadline) left out; once another's deadline has passed,
    # its unstarted work counts 0. The page says so.
    from datetime import timedelta
    from web.models import Assignment, utcnow
    from web.services.analytics import score_matrix
    from web.services.courses import default_course
    with db_session(env) as session:
        assignments, rows = score_matrix(session, default_course(session), sort="total")
        ada_row = next(r for r in rows if r["email"] == "ada@example.org")
        assert (ada_row["total"], ada_row["counted"]) == (pytest.approx(40.0), 1)
        assert "left out" in page and f"{round(ada_row['total'], 1):g}%" in page
        other = next(a for a in assignments if a.slug != "sdpa")
        session.get(Assignment, other.id).deadline = utcnow() - timedelta(days=1)
        session.commit()
        _, rows = score_matrix(session, default_course(session), sort="total")
    ada_row = next(r for r in rows if r["email"] == "ada@example.org")
    assert (ada_row["total"], ada_row["counted"]) == (pytest.approx(20.0), 2)
    page = prof.get("/instructor/?q=ADA").get_data(as_text=True)
    prof.post("/language", data={"lang": "ru"})  # the decimal sign and the percent sign of the page's language
    page = prof.get("/instructor/?q=ADA").get_data(as_text=True)
    assert f"{round(ada_row['total'], 1):g}".replace(".", ",") + "\xa0%" in page
    assert prof.get("/instructor/charts/sdpa/scores.svg").mimetype == "image/svg+xml"
    stats = prof.get("/instructor/assignments/sdpa").get_data(as_text=True)
    assert "<code>values</code>" in stats and "50%" in stats, stats  # one of two fails "values"
    assert prof.get("/instructor/charts/sdpa/failures.svg").status_code == 200


def test_csv_exports_in_three_layouts(env, ada, prof):
    ada.post("/tasks/sdpa", data={"code": "a = 1\n# SCORE=6\n"})
    grade_queued(env)
    plain = prof.get("/instructor/scores.csv")
    assert plain.headers["Content-Disposition"] == "attachment; filename=scores.csv"
    lines = plain.get_data(as_text=True).splitlines()
    assert lines[0] == "email,name,assignment,kind,best_score,max_score,attempts,last_submitted_at,final"
    assert any(line.startswith("ada@example.org,ada,sdpa,task,6.0,10.0,1,") for line in lines)
    canvas = prof.get("/instructor/scores.csv?layout=canvas").get_data(as_text=True).splitlines()
    assert canvas[0].startswith("Student,ID,SIS User ID,SIS Login ID,Section,")
    assert "(sdpa)" not in canvas[0]  # a column without a Canvas id is named by its title
    assert canvas[1].startswith("    Points Possible,,,,,10")
    assert any(line.startswith("ada,,,ada@example.org,") and ",6," in line + "," for line in canvas)
    moodle = prof.get("/instructor/scores.csv?layout=moodle").get_data(as_text=True).splitlines()
    assert moodle[0].startswith("Email address,Full name,")
    assert any(line.startswith("ada@example.org,ada,6") for line in moodle)
    assert prof.get("/instructor/scores.csv?layout=excel").status_code == 404


def test_assignment_settings_are_validated_and_saved(env, prof, ada):
    page = prof.get("/instructor/assignments/sdpa/settings").get_data(as_text=True)
    assert 'name="deadline"' in page and 'name="question_ids"' not in page
    bad = prof.post("/instructor/assignments/sdpa/settings", data={
        "title": "SDPA", "opens_at": "2030-01-02T10:00", "deadline": "2030-01-01T10:00",
        "late_policy": "reject", "feedback": "full", "rate_limit_count": "3"})
    text = bad.get_data(as_text=True)
    assert "the deadline must come after the opening time" in text
    assert "give both the number of submissions and the window" in text
    good = prof.post("/instructor/assignments/sdpa/settings", data={
        "title": "SDPA (graded)", "visible": "y", "deadline": "2020-01-01T10:00",
        "late_policy": "penalty", "late_penalty": "0.25", "max_attempts": "5",
        "rate_limit_count": "3", "rate_limit_seconds": "60", "feedback": "after_deadline"})
    assert good.status_code == 302
    from web.models import Assignment
    with db_session(env) as session:
        task = session.query(Assignment).filter_by(slug="sdpa").one()
        assert (task.title, task.late_policy, task.late_penalty, task.max_attempts) == \
            ("SDPA (graded)", "penalty", 0.25, 5)
        assert (task.rate_limit_count, task.rate_limit_seconds, task.feedback) == (3, 60, "after_deadline")
        assert task.deadline.year == 2020 and task.opens_at is None
    # late work now counts with the penalty, and the student's page says so
    sid = _submission_id(ada.post("/tasks/sdpa", data={"code": "a = 1\n# SCORE=8\n"}))
    grade_queued(env)
    page = ada.get(f"/submissions/{sid}").get_data(as_text=True)
    assert "late" in page and "6 / 10" in page
    quiz = prof.get("/instructor/assignments/quiz/settings").get_data(as_text=True)
    assert 'name="question_ids"' in quiz and "derive-score-variance" in quiz


def test_question_bank_reload_reports_validation(env, prof):
    page = prof.get("/instructor/questions").get_data(as_text=True)
    assert "derive-score-variance" in page and "Reload and validate" in page
    page = prof.post("/instructor/questions", follow_redirects=True).get_data(as_text=True)
    assert "Question bank reloaded" in page and "Validation report" in page


def test_job_monitor_counts_and_timings(env, ada, prof):
    ada.post("/tasks/sdpa", data={"code": "a = 1\n"})
    page = prof.get("/instructor/jobs").get_data(as_text=True)
    assert re.search(r'id="count-queued">1<', page)
    grade_queued(env)
    page = prof.get("/instructor/jobs").get_data(as_text=True)
    assert re.search(r'id="count-done">1<', page) and "test-worker" in page
    assert "Queue wait" in page and "p95" in page


def test_regrade_every_submission_of_an_assignment(env, ada, bob, prof):
    ada.post("/tasks/sdpa", data={"code": "a = 1\n# SCORE=4\n"})
    bob.post("/tasks/sdpa", data={"code": "b = 1\n"})
    grade_queued(env)
    page = prof.post("/instructor/assignments/sdpa/regrade").get_data(as_text=True)
    assert "Regrade every submission of" in page and grade_queued(env) == 0  # asks first
    page = prof.post("/instructor/assignments/sdpa/regrade", data={"confirmed": "yes"},
                     follow_redirects=True).get_data(as_text=True)
    assert "2 submissions of Scaled dot-product attention queued" in page
    again = prof.post("/instructor/assignments/sdpa/regrade", data={"confirmed": "yes"},
                      follow_redirects=True).get_data(as_text=True)
    assert "0 submissions of Scaled dot-product attention queued" in again  # queued already
    assert grade_queued(env) == 2
    from web.models import Result
    with db_session(env) as session:  # the first results stay on record; the workers' are regrades
        assert sorted(r.kind for r in session.query(Result)) == ["grade", "grade", "regrade", "regrade"]


def test_spec_markdown_nests_lists_highlights_code_and_escapes_html():
    from web.pages.helpers import render_markdown
    html = str(render_markdown("- mask:\n  - boolean\n  - float\n\n```python\ndef f(): pass\n```\n\n"
                               "<script>alert(1)</script>\n"))
    assert re.search(r"<li>mask:\s*<ul>\s*<li>boolean</li>", html)
    assert '<pre class="highlight"><span class="k">def</span>' in html
    assert "<script>" not in html and "&lt;script&gt;" in html


def _unparsable(code, task, **_):
    return {"task": task, "score": 0.0, "max_score": 3.0, "passed": False,
            "error": {"kind": "import", "message": "Python cannot parse your file"},
            "grader_version": "t", "sandbox": "none", "warnings": [], "timings": {},
            "checks": [{"id": "load.source", "passed": False, "points": 0, "max_points": 2,
                        "message": "Python cannot parse your file: invalid syntax (line 1)",
                        "details": {"line": 1, "offset": 7, "text": "def f(:"}},
                       {"id": "load.import", "passed": False, "points": 0, "max_points": 1,
                        "message": "skipped: the submission could not be loaded",
                        "details": {"skipped": True}}]}


def test_a_file_that_does_not_parse_shows_where_and_skips_the_rest(env, ada):
    sid = _submission_id(ada.post("/tasks/sdpa", data={"code": "def f(:\n"}))
    grade_queued(env, _unparsable)
    page = ada.get(f"/submissions/{sid}").get_data(as_text=True)
    assert "1 other check was not run: the submission could not be loaded" in page
    assert "load.import" not in page  # a skipped check has no row of its own
    assert "source line</dt><dd><code>def f(:</code>" in page
    assert 'id="check-1"' not in page  # nothing to unfold for a skipped check
    assert "import: Python cannot parse your file" in page  # the report's error


def test_account_page_issues_a_token_the_api_accepts_and_revokes_it(env, ada):
    page = ada.post("/account", data={"label": "laptop"}).get_data(as_text=True)  # ada had one
    token = re.search(r'<code id="new-token">(agt_[^<]+)</code>', page).group(1)
    api = env.app.test_client()
    assert api.get("/api/v1/tasks", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    listing = ada.get("/account").get_data(as_text=True)
    assert token not in listing and token[:10] in listing and "laptop" in listing
    assert "Revoke every API token?" in ada.post("/account/revoke-tokens").get_data(as_text=True)
    assert api.get("/api/v1/tasks", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    assert "2 API tokens revoked." in ada.post("/account/revoke-tokens", data={"confirmed": "yes"},
                                                 follow_redirects=True).get_data(as_text=True)
    assert api.get("/api/v1/tasks", headers={"Authorization": f"Bearer {token}"}).status_code == 401


def test_charts_draw_odd_data():
    from web.pages import charts
    heat = charts.weights_heatmaps([[None, 1.0], [0.5, "nan"]])  # NaN cells, no reference
    assert heat.startswith(b"<?xml") and b"reference" not in heat
    huge = charts.variance_plot([{"d_k": 8, "variance": 8.0}, {"d_k": 512, "variance": 512.0}])
    assert b"<svg" in huge
    assert b"no graded work yet" in charts.score_histogram([], None)
    assert b"no scored check has failed yet" in charts.failure_bars(
        [{"check_id": "a", "failed_all": 0, "latest_rate": 0.0, "max_points": 2.0},
         # a reported-only check failing everywhere is not drawn
         {"check_id": "hint", "failed_all": 3, "failed_latest": 3, "students": 3, "max_points": 0.0}])


def test_grading_that_failed_on_our_side_says_so(env, ada):
    from web.models import GradingJob
    sid = _submission_id(ada.post("/tasks/sdpa", data={"code": "a = 1\n"}))
    with db_session(env) as session:
        job = session.query(GradingJob).filter_by(submission_id=sid).one()
        job.status, job.error = "failed", "grading host lost"
        job.submission.status = "failed"
        session.commit()
    assert ada.get(f"/submissions/{sid}/status.json").get_json()["finished"] is True
    page = ada.get(f"/submissions/{sid}").get_data(as_text=True)
    assert "Grading failed on our side: grading host lost" in page
    assert "js/status.js" not in page


def test_every_registered_task_is_an_assignment_with_its_page(env, ada, prof):
    from grader.tasks import TASKS
    home = ada.get("/").get_data(as_text=True)
    matrix = prof.get("/instructor/").get_data(as_text=True)
    assert all(f"sort={task_id}" in matrix for task_id in TASKS)  # a score-matrix column per task
    assert set(TASKS) >= {"sdpa", "mha", "sdpa_backward", "decoder_attention", "tiled_attention", "kv_cache_attention"}
    for task in TASKS.values():
        assert task.title in home
        page = ada.get(f"/tasks/{task.id}").get_data(as_text=True)
        assert f"{task.function}(" in page  # the rendered spec names the function to write
        assert ada.get(f"/tasks/{task.id}/starter.py").get_data(as_text=True) == task.template


def test_the_language_is_chosen_at_sign_up_preset_to_the_browsers(env):
    from web.models import User
    client = env.app.test_client()
    page = client.get("/sign-up", headers={"Accept-Language": "ru-RU,ru;q=0.9"}).get_data(as_text=True)
    assert '<option selected value="ru">' in page or '<option value="ru" selected>' in page
    client.post("/sign-up", data={"name": "Mei", "email": "mei@example.org", "lang": "zh",
                                  "password": "attention-heads-8", "confirm": "attention-heads-8"})
    assert '<html lang="zh">' in client.get("/").get_data(as_text=True)
    from pages_support import db_session
    with db_session(env) as session:
        assert session.query(User).filter_by(email="mei@example.org").one().locale == "zh"
