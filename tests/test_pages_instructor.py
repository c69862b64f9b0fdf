"""What an instructor reads, through Flask's test client (review 2: N3, N5, N9, N14, N15, I6):
the student's bug-first summary on the instructor's result page, common mistakes by named
bug, no failure mark for a reported-only check, the late warning before submitting, the
sign-up form's password rule, and a page per student."""
from __future__ import annotations

import html
import re
from datetime import timedelta

from pages_support import ada, bob, db_session, env, grade_queued, prof  # noqa: F401


def _submission_id(response) -> int:
    assert response.status_code == 302, response.get_data(as_text=True)[:500]
    return int(re.search(r"/submissions/(\d+)$", response.location).group(1))


def _text(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def _bug_report(code, task, **_):
    """A report made as the grader makes it: a named bug charged once (grader/causes.py), its
    knock-on, a failure no bug explains (numbers in its message) and a reported-only check."""
    from grader.causes import charge_once
    from grader.grading import CheckResult, GradeReport
    from grader.i18n import T

    bug = "no_scale" if "NOSCALE" in code else "mask_after_softmax"
    family = "scale" if bug == "no_scale" else "mask"
    checks = [
        CheckResult("load.source", True, 2, 2, T("valid UTF-8 Python")),
        CheckResult(f"{family}.default", False, 0, 8, T("wrong weights"), {"diagnosis": bug}),
        CheckResult("output.float64", False, 0, 4, T("wrong values"), {"diagnosis": bug}),
        CheckResult("batch.independent", "BATCH" not in code, 0 if "BATCH" in code else 6,
                    6, T("changing batch element {b} changed the output of element 0 by {d:.3g}",
                         b=len(code) % 7 + 1, d=0.25 + len(code) / 100)),
        CheckResult("fully_masked.zeros", False, 0, 0,
                    T("a fully masked row gives NaN. Optional: not scored")),
    ]
    report = GradeReport(task=task, checks=checks, sandbox="none")
    report.causes = charge_once(report.checks, {"scale", "mask", "output", "batch", "load"})
    return report.to_dict()


def _full_marks_report(code, task, **_):
    from grader.grading import CheckResult, GradeReport
    from grader.i18n import T
    checks = [CheckResult("output.float64", True, 10, 10, T("matches the reference")),
              CheckResult("fully_masked.zeros", False, 0, 0, T("a fully masked row gives NaN. Optional: not scored"))]
    return GradeReport(task=task, checks=checks, sandbox="none").to_dict()


def test_the_instructor_reads_the_students_summary(env, ada, prof):
    sid = _submission_id(ada.post("/tasks/sdpa", data={"code": "NOSCALE BATCH\n"}))
    grade_queued(env, _bug_report)
    summaries = [re.search(r'<p class="summary-fail">(.*?)</p>', client.get(url).get_data(as_text=True), re.S)
                 .group(1) for client, url in ((ada, f"/submissions/{sid}"), (prof, f"/instructor/submissions/{sid}"))]
    assert summaries[0] == summaries[1]
    assert summaries[0].startswith("1 bug found: you do not scale the scores")


def test_a_reported_only_check_never_shows_a_failure_mark(env, ada, prof):
    sid = _submission_id(ada.post("/tasks/sdpa", data={"code": "x = 1\n"}))
    grade_queued(env, _full_marks_report)
    for page in (ada.get(f"/submissions/{sid}").get_data(as_text=True),
                 prof.get(f"/instructor/submissions/{sid}").get_data(as_text=True)):
        assert "10 / 10" in page and "✗" not in page and 'class="fail"' not in page
        assert re.search(r'<tr class="note">\s*<td class="mark" aria-label="not scored">○</td>', page)


def test_common_mistakes_are_grouped_by_named_bug_and_shown_by_real_messages(env, ada, bob, prof):
    ada.post("/tasks/sdpa", data={"code": "NOSCALE BATCH\n"})
    bob.post("/tasks/sdpa", data={"code": "MASK BATCH, another length\n"})
    grade_queued(env, _bug_report)
    page = prof.get("/instructor/assignments/sdpa").get_data(as_text=True)
    bugs = _text(re.search(r'<table class="list" id="common-bugs">(.*?)</table>', page, re.S).group(1))
    assert "you do not scale the scores" in bugs and "you apply the mask after the softmax" in bugs
    assert bugs.count("50% (1/2)") == 2
    rates = _text(re.search(r'<table class="list" id="failure-rates">(.*?)</table>', page, re.S).group(1))
    # batch.independent: no bug named, two different messages, one group shown by a real one
    assert re.search(r"batch\.independent 100% \(2/2\) 100% \(2/2\) for example: changing batch element \d "
                     r"changed the output of element 0 by [\d.]+ × 2", rates), rates
    assert "…" not in rates and "{" not in rates
    prof.post("/language", data={"lang": "ru"})  # a named bug in the reader's language
    assert "вы не масштабируете оценки" in prof.get("/instructor/assignments/sdpa").get_data(as_text=True)
    svg = prof.get("/instructor/charts/sdpa/failures.svg").get_data(as_text=True)
    assert "batch.independent" in svg and "fully_masked.zeros" not in svg  # scored checks only


def test_the_task_page_warns_before_late_work(env, ada):
    from web.models import Assignment, utcnow
    assert 'id="late-warning"' not in ada.get("/tasks/sdpa").get_data(as_text=True)
    with db_session(env) as session:
        task = session.query(Assignment).filter_by(slug="sdpa").one()
        task.deadline, task.late_policy, task.late_penalty = utcnow() - timedelta(hours=1), "penalty", 0.2
        session.commit()
    page = ada.get("/tasks/sdpa").get_data(as_text=True)
    warning = re.search(r'<p class="flash flash-warn" id="late-warning">(.*?)</p>', page, re.S).group(1)
    assert "has passed" in warning and "loses 20 % of its score" in warning
    # and at the top, beside the deadline, where a reader looks first (review 3: N9 still seen as missing)
    meta = re.search(r'<p class="meta">(.*?)</p>', page, re.S).group(1)
    assert 'class="late-note"' in meta and 'href="#late-warning"' in meta


def test_the_sign_up_form_states_the_password_rule_it_enforces(env):
    client = env.app.test_client()
    page = client.get("/sign-up").get_data(as_text=True)
    assert "at least 8 characters besides your email address" in page
    ok = client.post("/sign-up", data={"name": "Ada Learner", "email": "ada.l@example.net",
                                       "password": "ada.l-strong-pass-42", "confirm": "ada.l-strong-pass-42",
                                       "lang": "en"})
    assert ok.status_code == 302


def test_a_student_page_lists_their_work(env, ada, bob, prof):
    sid = _submission_id(ada.post("/tasks/sdpa", data={"code": "x = 1\n# SCORE=4\n"}))
    bob.post("/tasks/sdpa", data={"code": "y = 1\n"})
    grade_queued(env)
    ada.post("/quiz/quiz/start")
    matrix = prof.get("/instructor/").get_data(as_text=True)
    link = re.search(r'<a href="(/instructor/students/\d+)">ada</a>', matrix).group(1)
    page = prof.get(link).get_data(as_text=True)
    assert f'href="/instructor/submissions/{sid}"' in page and "Attempt 1" in page
    assert re.search(r'href="/quiz/attempts/\d+"', page)  # the quiz attempt, in progress
    assert "bob@example.org" not in page
    assert prof.get("/instructor/students/99999").status_code == 404
    assert ada.get(link).status_code == 403


def test_some_check_families_are_shown_only_after_the_deadline(env, ada, prof):
    from web.models import Assignment, utcnow
    page = prof.get("/instructor/assignments/sdpa/settings").get_data(as_text=True)
    assert 'name="hidden_families"' in page
    refused = prof.post("/instructor/assignments/sdpa/settings", data={
        "title": "Attention", "late_policy": "reject", "feedback": "full", "hidden_families": "nonsense"})
    assert "not a check family of this task" in refused.get_data(as_text=True)
    with db_session(env) as session:
        task = session.query(Assignment).filter_by(slug="sdpa").one()
        task.hidden_families, task.deadline = ["batch"], utcnow() + timedelta(days=1)
        session.commit()
    sid = _submission_id(ada.post("/tasks/sdpa", data={"code": "NOSCALE BATCH\n"}))
    grade_queued(env, _bug_report)
    student = ada.get(f"/submissions/{sid}").get_data(as_text=True)
    summary = _text(re.search(r'<p class="summary-fail">(.*?)</p>', student, re.S).group(1))
    assert summary.startswith("1 bug found: you do not scale") and "batch" not in summary
    assert "changing batch element" not in student and 'id="hidden-note"' in student
    assert re.search(r"<code>batch\.independent</code></td>\s*<td class=\"num\">0 / 6</td>", student)
    api = ada.get(f"/api/v1/submissions/{sid}").get_json()  # the API says no more than the page
    assert "changing batch element" not in str(api)
    instructor = prof.get(f"/instructor/submissions/{sid}").get_data(as_text=True)
    assert "changing batch element" in instructor  # the instructor sees everything
    with db_session(env) as session:
        session.query(Assignment).filter_by(slug="sdpa").one().deadline = utcnow() - timedelta(minutes=1)
        session.commit()
    after = ada.get(f"/submissions/{sid}").get_data(as_text=True)
    assert "changing batch element" in after and 'id="hidden-note"' not in after
