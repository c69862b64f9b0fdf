"""What a student reads on the result pages: tracebacks, their output, their own attempt
numbers, the code of any attempt and two attempts side by side, and clear refusals."""
from __future__ import annotations

import html
import re
from pathlib import Path

from pages_support import ada, bob, db_session, env, grade_queued, prof  # noqa: F401

XSS = "<script>alert('x')</script>"
TRACEBACK = ('  File "submission.py", line 5, in scaled_dot_product_attention\n'
             '    raise ValueError("boom")\nValueError: boom\n')
PARSE_ERROR = "Python cannot parse your file: invalid syntax (line 3)"


def _submission_id(response) -> int:
    assert response.status_code == 302, response.get_data(as_text=True)[:500]
    return int(re.search(r"/submissions/(\d+)$", response.location).group(1))


def _text(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def _raising_report(code, task, **_):
    """The shape the real grader gives for a function that raises, and prints first."""
    return {"task": task, "score": 1.0, "max_score": 3.0, "passed": False, "error": None,
            "grader_version": "t", "sandbox": "none", "warnings": [], "timings": {},
            "student_stdout": f"hello from the student {XSS}\n", "student_stderr": "a warning\n",
            "checks": [
                {"id": "load.import", "passed": True, "points": 1, "max_points": 1,
                 "message": "the file imports", "details": {}},
                {"id": "output.shapes", "passed": False, "points": 0, "max_points": 1,
                 "message": "your function raised ValueError: boom",
                 "details": {"error_kind": "exception", "traceback": TRACEBACK}},
                {"id": "output.float64", "passed": False, "points": 0, "max_points": 1,
                 "message": "wrong values. Likely cause: the scores are not divided by √d_k",
                 "details": {"case": "float64 inputs", "diagnosis": "no_scale",
                             "because_of": "scale_constant"}}]}


def _syntax_error_report(code, task, **_):
    """What the grader reports for a file that does not parse: one failure, 31 skipped."""
    skipped = [{"id": f"check.{i}", "passed": False, "points": 0, "max_points": 3,
                "message": "skipped: the submission could not be loaded",
                "details": {"skipped": True}} for i in range(31)]
    return {"task": task, "score": 0.0, "max_score": 95.0, "passed": False, "error": PARSE_ERROR,
            "grader_version": "t", "sandbox": "none", "warnings": [], "timings": {},
            "checks": [{"id": "load.source", "passed": False, "points": 0, "max_points": 2,
                        "message": PARSE_ERROR,
                        "details": {"line": 3, "offset": 9, "text": "def f(:"}}] + skipped}


def test_traceback_keeps_its_lines_and_the_students_output_is_shown(env, ada):
    sid = _submission_id(ada.post("/tasks/sdpa", data={"code": "x = 1\n"}))
    grade_queued(env, _raising_report)
    page = ada.get(f"/submissions/{sid}").get_data(as_text=True)
    block = re.search(r'<pre class="traceback">(.*?)</pre>', page, re.S).group(1)
    assert html.unescape(block) == TRACEBACK  # newlines kept, inside <pre>
    assert "error_kind" not in page and "no_scale" not in page and "diagnosis" not in page
    assert "scale_constant" not in page and "because of" not in page  # a bug's internal name
    assert "Likely cause: the scores are not divided by √d_k" in page
    output = re.findall(r'<pre class="output">(.*?)</pre>', page, re.S)
    assert [html.unescape(o) for o in output] == [f"hello from the student {XSS}\n", "a warning\n"]
    assert XSS not in page  # the student's output is escaped


def _reproducible_report(code, task, **_):
    report = _raising_report(code, task)
    report["checks"][2]["details"]["reproduce"] = "attn-grader check FILE --task sdpa --only output.float64"
    return report


def test_the_command_that_reruns_a_check_is_labelled_in_the_readers_language(env, ada):
    sid = _submission_id(ada.post("/tasks/sdpa", data={"code": "x = 1\n"}))
    grade_queued(env, _reproducible_report)
    page = ada.get(f"/submissions/{sid}").get_data(as_text=True)
    assert "<dt>run this check alone</dt><dd><code>attn-grader check FILE --task sdpa --only " \
           "output.float64</code></dd>" in page
    assert "<dt>reproduce</dt>" not in page  # not the report's raw key
    ada.post("/language", data={"lang": "ru", "next": "/"})
    assert "<dt>запустить только эту проверку</dt>" in ada.get(f"/submissions/{sid}").get_data(as_text=True)


def test_the_graders_detail_keys_are_labelled_and_its_flags_hidden():
    from web.pages.results import describe_check
    check = {"id": "forbidden.static", "passed": False, "points": 0, "max_points": 3, "message": "m",
             "details": {"findings": [{"line": 8, "what": "uses torch.nn.MultiheadAttention"}],
                         "detected": True, "tampering": True, "fingerprint": "builtin",
                         "ops": ["aten::_scaled_dot_product_flash_attention"], "mutated": ["attn_mask"],
                         "analytic": -6.08, "numerical": 0.0, "changed": "batch element 2",
                         "max_change_elsewhere": 0.91, "changed_from": 2, "max_change": 1.5,
                         "wrong": ["cross_out"], "protocol": ["wrote to the answer channel"]}}
    described = describe_check(check)
    assert described["other"] == []  # no raw key left for the page to show
    labels = [str(label) for label, _ in described["facts"]]
    assert "found in your source" in labels and "inputs your function modified" in labels
    assert not {"detected", "tampering", "fingerprint"} & set(labels)


def test_a_syntax_error_is_one_clear_message_not_a_row_per_skipped_check(env, ada):
    sid = _submission_id(ada.post("/tasks/sdpa", data={"code": "def f(:\n"}))
    grade_queued(env, _syntax_error_report)
    page = ada.get(f"/submissions/{sid}").get_data(as_text=True)
    assert page.count(PARSE_ERROR) == 1
    assert "31 other checks were not run: the submission could not be loaded" in page
    assert "check.0" not in page and "skipped:" not in page
    assert "source line</dt><dd><code>def f(:</code>" in page


def test_attempts_are_numbered_per_student_and_every_attempt_shows_its_code(env, ada, bob):
    for n in range(3):  # bob's submissions take the first global ids
        _submission_id(bob.post("/tasks/sdpa", data={"code": f"b = {n}\n"}))
    first = _submission_id(ada.post("/tasks/sdpa", data={"code": f"a = 1  # {XSS}\n"}))
    second = _submission_id(ada.post("/tasks/sdpa", data={"code": "a = 2\n"}))
    grade_queued(env)
    page = ada.get(f"/submissions/{first}").get_data(as_text=True)
    assert "<h1>Attempt 1 " in page and f"Attempt #{first}" not in page
    assert "The code of attempt 1" in page and XSS not in page
    assert "a = 1" in html.unescape(re.sub(r"<[^>]+>", "", page))  # the code, no attempt before
    assert "Attempt 2" in ada.get(f"/submissions/{second}").get_data(as_text=True)
    task = ada.get("/tasks/sdpa").get_data(as_text=True)
    assert "Attempt 1" in task and "Attempt 2" in task


def test_two_chosen_attempts_side_by_side(env, ada, bob):
    first = _submission_id(ada.post("/tasks/sdpa", data={"code": f"a = 1\nkeep = 0  # {XSS}\n"}))
    second = _submission_id(ada.post("/tasks/sdpa", data={"code": f"a = 2\nkeep = 0  # {XSS}\n"}))
    third = _submission_id(ada.post("/tasks/sdpa", data={"code": "a = 3\n"}))
    page = ada.get(f"/submissions/{third}").get_data(as_text=True)
    assert f'action="/submissions/{third}/compare"' in page and 'name="old"' in page
    response = ada.get(f"/submissions/{third}/compare?old={first}&new={second}")
    page = response.get_data(as_text=True)
    assert response.status_code == 200 and "Attempt 1 beside attempt 2" in page
    assert 'class="diff"' in page and "diff_chg" in page and XSS not in page
    default = ada.get(f"/submissions/{second}/compare").get_data(as_text=True)
    assert "Attempt 1 beside attempt 2" in default  # the attempt before, by default
    assert "the same code" in ada.get(f"/submissions/{first}/compare").get_data(as_text=True)
    theirs = _submission_id(bob.post("/tasks/sdpa", data={"code": "b = 1\n"}))
    assert ada.get(f"/submissions/{first}/compare?old={theirs}").status_code == 404
    assert ada.get(f"/submissions/{theirs}/compare").status_code == 404


def test_too_large_code_says_the_limit_and_keeps_the_editor(env, ada):
    limit = env.config["MAX_SUBMISSION_BYTES"]
    task = ada.get("/tasks/sdpa").get_data(as_text=True)
    assert f'data-max-bytes="{limit}"' in task  # the editor refuses before sending
    big = "x = 1\n# " + "a" * (limit + 10) + "\n"  # over the limit, under the request cap
    page = ada.post("/tasks/sdpa", data={"code": big}).get_data(as_text=True)
    assert f"the limit is {limit} bytes" in page and "a" * (limit + 10) in page  # content kept
    huge = ada.post("/tasks/sdpa", data={"code": "#" * (3 * limit)})  # over the request cap
    text = _text(huge.get_data(as_text=True))
    assert huge.status_code == 413 and f"limited to {limit} bytes ({limit // 1024} KiB)" in text


def test_rate_limit_refusals_say_minutes(env, ada):
    from web.models import Assignment
    with db_session(env) as session:
        task = session.query(Assignment).filter_by(slug="sdpa").one()
        task.rate_limit_count, task.rate_limit_seconds = 1, 3600
        session.commit()
    _submission_id(ada.post("/tasks/sdpa", data={"code": "a = 1\n"}))
    page = _text(ada.post("/tasks/sdpa", data={"code": "a = 2\n"}).get_data(as_text=True))
    assert re.search(r"at most 1 submissions per 60 min for sdpa; try again in 60 min", page)
    assert " s for" not in page
    ada.post("/language", data={"lang": "zh"})
    page = _text(ada.post("/tasks/sdpa", data={"code": "a = 3\n"}).get_data(as_text=True))
    assert "60 分钟" in page and "60 min" not in page


def test_sign_up_says_a_short_password_once(env):
    page = env.app.test_client().post("/sign-up", data={
        "name": "Cleo", "email": "cleo@example.org", "password": "short", "confirm": "short"}
    ).get_data(as_text=True)
    assert page.count("use at least 8 characters") == 1


def test_pages_have_a_favicon(env, ada):
    assert 'rel="icon" href="/static/favicon.svg"' in ada.get("/").get_data(as_text=True)
    response = env.app.test_client().get("/favicon.ico")
    assert response.status_code == 301 and response.location.endswith("/static/favicon.svg")


def test_the_api_answers_with_the_result_page(env):
    token = env.people["ada"]["token"]
    r = env.app.test_client().post("/api/v1/submissions", json={"task": "sdpa", "code": "x = 1"},
                                   headers={"Authorization": f"Bearer {token}"})
    body = r.get_json()
    # the canonical link names the public id (true after a restore); /submissions/<id> still works
    assert r.status_code == 202 and body["page_url"].endswith(f"/s/{body['public_id']}")


def test_heatmaps_mark_nan_cells_and_name_the_slice():
    from web.pages import charts
    heat = charts.weights_heatmaps([[None, 1.0], [0.5, 0.25]], [[0.5, 0.5], [0.5, 0.5]])
    assert b"NaN (not a number)" in heat and "batch 0, head 0".encode() in heat
    clean = charts.weights_heatmaps([[0.5, 0.5], [0.25, 0.75]])
    assert b"NaN" not in clean
    single = charts.variance_plot([{"d_k": 32, "variance": 32.0, "expected": 0.1748}])
    assert b"expected with the scale given" in single and b"d_k = 32" in single


def test_heatmap_axes_count_positions_and_the_reference_panel_has_no_second_label():
    from web.pages import charts
    weights = [[0.2, 0.3, 0.5], [0.1, 0.1, 0.8], [0.3, 0.3, 0.4]]
    svg = charts.weights_heatmaps(weights, weights).decode()
    labels = set(re.findall(r">([^<>]{1,20})</text>", svg))
    assert {"0", "1", "2"} <= labels and not labels & {"0.5", "1.5", "2.5", "-0.5"}  # whole positions
    assert svg.count("query position") == 1  # on the first panel only: it would sit on the first's picture
    assert svg.count("key position") == 2


def test_an_override_survives_regrading_and_its_comment_reaches_the_student(env, ada, prof):
    sid = _submission_id(ada.post("/tasks/sdpa", data={"code": "x = 1\n# SCORE=4\n"}))
    grade_queued(env)
    prof.post(f"/instructor/submissions/{sid}/override",
              data={"points": "9", "comment": f"hand-checked {XSS}"})
    confirm = prof.post("/instructor/assignments/sdpa/regrade").get_data(as_text=True)
    assert "1 score you overrode by hand stays as you set it" in confirm
    prof.post("/instructor/assignments/sdpa/regrade", data={"confirmed": "yes"})
    assert grade_queued(env) == 1
    assert ada.get(f"/submissions/{sid}/status.json").get_json()["score"] == 9.0
    page = ada.get(f"/submissions/{sid}").get_data(as_text=True)
    assert "Your instructor set this score to 9" in page and "hand-checked &lt;script&gt;" in page
    staff = prof.get(f"/instructor/submissions/{sid}").get_data(as_text=True)
    assert 'id="overridden"' in staff and "regrading keeps the score" in staff


def test_tokens_are_revoked_one_by_one(env, ada, bob):
    import re as _re
    from web.models import ApiToken
    page = ada.post("/account", data={"label": "laptop"}).get_data(as_text=True)
    new = _re.search(r'<code id="new-token">(agt_[^<]+)</code>', page).group(1)
    with db_session(env) as session:
        laptop = session.query(ApiToken).filter_by(label="laptop").one().id
    api = env.app.test_client()
    assert bob.post(f"/account/tokens/{laptop}/revoke").status_code == 404  # not bob's
    ada.post(f"/account/tokens/{laptop}/revoke")
    assert api.get("/api/v1/tasks", headers={"Authorization": f"Bearer {new}"}).status_code == 401
    old = env.people["ada"]["token"]
    assert api.get("/api/v1/tasks", headers={"Authorization": f"Bearer {old}"}).status_code == 200


def _mixed_report(code, task, **_):
    if "SYNTAX" in code:
        return _syntax_error_report(code, task)
    cause = "the scores are not divided by √d_k" if "NOSCALE" in code else "the mask is ignored"
    return {**_raising_report(code, task), "checks": [
        {"id": "check.0", "passed": False, "points": 0, "max_points": 3,
         "message": f"4-D inputs: largest difference 1.{len(code)} at [0, 1]. Likely cause: {cause}.",
         "details": {"diagnosis": "x"}}]}


def test_common_mistakes_count_diagnoses_and_not_skipped_checks(env, ada, bob, prof):
    from web.models import Assignment
    from web.services.mistakes import check_failure_rates, mistake
    assert mistake("shape: got (2, 3): expected (2, 4)") == "shape: got (…, …): expected (…, …)"
    ada.post("/tasks/sdpa", data={"code": "NOSCALE 1\n"})
    bob.post("/tasks/sdpa", data={"code": "NOSCALE 22\n"})
    ada.post("/tasks/sdpa", data={"code": "MASK\n"})
    bob.post("/tasks/sdpa", data={"code": "SYNTAX\n"})  # bob's latest: check.0 was skipped
    grade_queued(env, _mixed_report)
    with db_session(env) as session:
        rates = {r["check_id"]: r for r in check_failure_rates(
            session, session.query(Assignment).filter_by(slug="sdpa").one())}
    row = rates["check.0"]
    assert [(m["count"], m["bug"]) for m in row["common_mistakes"]] == [(2, None), (1, None)]
    assert "the scores are not divided by √d_k" in row["common_mistakes"][0]["example"]
    assert "the mask is ignored" in row["common_mistakes"][1]["example"]
    assert (row["failed_all"], row["total_all"]) == (3, 3)  # the skipped run is not counted
    page = prof.get("/instructor/assignments/sdpa").get_data(as_text=True)
    assert "the scores are not divided by √d_k. <span class=\"muted\">× 2</span>" in page


def test_scores_link_to_the_work_and_a_score_awaiting_review_is_not_final(env, ada, prof):
    import csv
    import io
    sid = _submission_id(ada.post("/tasks/sdpa", data={"code": "x = 1\n# SCORE=4\n"}))
    grade_queued(env)
    ada.post("/quiz/quiz/start")
    ada.post("/quiz/quiz/questions/derive-score-variance",
             data={"q-derive-score-variance-text": "a derivation"})
    ada.post("/quiz/quiz/submit", data={"confirmed": "yes"})
    matrix = prof.get("/instructor/").get_data(as_text=True)
    assert f'href="/instructor/submissions/{sid}"' in matrix
    assert re.search(r'href="/quiz/attempts/\d+"', matrix) and "awaiting review" in matrix
    plain = list(csv.DictReader(io.StringIO(prof.get("/instructor/scores.csv").get_data(as_text=True))))
    quiz = next(r for r in plain if r["email"] == "ada@example.org" and r["kind"] == "quiz")
    task = next(r for r in plain if r["email"] == "ada@example.org" and r["kind"] == "task")
    assert (quiz["final"], task["final"]) == ("false", "true")
    canvas = list(csv.reader(io.StringIO(
        prof.get("/instructor/scores.csv?layout=canvas").get_data(as_text=True))))
    header, ada_row = canvas[0], next(r for r in canvas if r[3] == "ada@example.org")
    from web.models import Assignment
    with db_session(env) as session:
        quiz_title = session.query(Assignment).filter_by(slug="quiz").one().title
    quiz_column = header.index(quiz_title)
    assert ada_row[quiz_column] == ""  # not exported as a final grade
    from web.services.gradebook import sortable_name
    assert [sortable_name(n) for n in ("Ada Lovelace", "Grace B. Hopper", "Plato")] == \
        ["Lovelace, Ada", "Hopper, Grace B.", "Plato"]


def test_the_interface_follows_the_accounts_language(env, ada):
    from pages_support import sign_in
    laptop = env.app.test_client()  # the same account in another browser, signed in before the changes
    sign_in(laptop, "ada@example.org")
    assert ">Assignments</a>" in ada.get("/tasks/sdpa").get_data(as_text=True)
    ada.post("/language", data={"lang": "zh", "next": "/"})
    page = ada.get("/tasks/sdpa").get_data(as_text=True)
    assert '<html lang="zh">' in page and ">作业</a>" in page and "提交评分" in page
    ada.post("/language", data={"lang": "ru", "next": "/"})
    page = ada.get("/tasks/sdpa").get_data(as_text=True)
    assert ">Задания</a>" in page and "Отправить на проверку" in page
    from web.services.users import find_user
    with db_session(env) as session:
        assert find_user(session, "ada@example.org").locale == "ru"  # once per account
    # the other browser's session follows the account (it kept its own copy, and showed and
    # wrote back the old language: review 2, N25)
    account = laptop.get("/account").get_data(as_text=True)
    assert '<html lang="ru">' in account and '<option selected value="ru">' in account
    fresh = env.app.test_client()  # a visitor gets the browser's language
    page = fresh.get("/sign-in", headers={"Accept-Language": "zh-CN,zh;q=0.9"}).get_data(as_text=True)
    assert '<html lang="zh">' in page and "登录" in page


def test_every_message_is_translated_in_the_committed_catalogues():
    from babel.messages.pofile import read_po
    root = Path(__file__).resolve().parent.parent / "web" / "translations"
    with open(root / "messages.pot", "rb") as f:
        wanted = {m.id for m in read_po(f) if m.id}
    for lang in ("ru", "zh"):
        with open(root / lang / "LC_MESSAGES" / "messages.po", "rb") as f:
            done = {m.id for m in read_po(f) if m.id and m.string}
        assert wanted <= done, (lang, sorted(wanted - done))
        assert (root / lang / "LC_MESSAGES" / "messages.mo").exists()


def test_an_extension_gives_one_student_a_later_deadline_and_more_attempts(env, ada, bob, prof):
    from datetime import timedelta
    from web.models import Assignment, utcnow
    with db_session(env) as session:
        task = session.query(Assignment).filter_by(slug="sdpa").one()
        task.deadline, task.late_policy, task.max_attempts = utcnow() - timedelta(hours=1), "reject", 1
        session.commit()
    refused = ada.post("/tasks/sdpa", data={"code": "a = 1\n"}).get_data(as_text=True)
    assert "Not submitted: the deadline for sdpa passed" in refused
    later = (utcnow() + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M")
    page = prof.post("/instructor/assignments/sdpa/extensions", follow_redirects=True, data={
        "email": "ada@example.org", "deadline": later, "extra_attempts": "1", "note": "ill"}
    ).get_data(as_text=True)
    assert "Extension for ada@example.org saved." in page and "ill" in page
    _submission_id(ada.post("/tasks/sdpa", data={"code": "a = 1\n"}))
    _submission_id(ada.post("/tasks/sdpa", data={"code": "a = 2\n"}))  # 1 + 1 extra attempt
    third = ada.post("/tasks/sdpa", data={"code": "a = 3\n"}).get_data(as_text=True)
    assert "no attempts left: 2 of 2 used" in third
    assert "your extension" in ada.get("/").get_data(as_text=True)
    theirs = bob.post("/tasks/sdpa", data={"code": "b = 1\n"}).get_data(as_text=True)
    assert "the deadline for sdpa passed" in theirs  # everyone else keeps the deadline
    bad = prof.post("/instructor/assignments/sdpa/extensions", follow_redirects=True,
                    data={"email": "nobody@example.org", "extra_attempts": "1"}).get_data(as_text=True)
    assert "Extension not saved: no account nobody@example.org" in bad


def test_the_grading_queue_names_the_language_an_answer_was_written_in(env, ada, prof):
    ada.post("/language", data={"lang": "ru", "next": "/"})
    ada.post("/quiz/quiz/start")
    ada.post("/quiz/quiz/questions/derive-score-variance",
             data={"q-derive-score-variance-text": "вывод дисперсии"})
    ada.post("/language", data={"lang": "zh", "next": "/"})  # the open attempt follows
    ada.post("/quiz/quiz/submit", data={"confirmed": "yes"})
    page = prof.get("/instructor/grading").get_data(as_text=True)
    assert "answered in Русский" in page and "answered in 中文" not in page


def test_the_question_bank_previews_a_question_in_any_language_and_variant(env, prof, ada):
    bank = prof.get("/instructor/questions").get_data(as_text=True)
    assert 'href="/instructor/questions/head-dimension"' in bank
    page = prof.get("/instructor/questions/head-dimension?lang=ru&seed=3").get_data(as_text=True)
    assert "Размерность одной головы" in page and "<fieldset disabled" in page
    assert "Answer of this variant" in page and "another variant" in page
    rubric = prof.get("/instructor/questions/derive-score-variance").get_data(as_text=True)
    assert "Rubric" in rubric
    assert prof.get("/instructor/questions/no-such-question").status_code == 404
    assert ada.get("/instructor/questions/head-dimension").status_code == 403


def test_a_free_text_grade_shows_which_rubric_items_were_met(env, ada, prof):
    from questions.model import load_bank
    rubric = load_bank().get("derive-score-variance").data["rubric"]
    ada.post("/quiz/quiz/start")
    ada.post("/quiz/quiz/questions/derive-score-variance",
             data={"q-derive-score-variance-text": "a derivation"})
    response = ada.post("/quiz/quiz/submit", data={"confirmed": "yes"})
    with db_session(env) as session:
        from web.models import QuizAnswer
        answer = session.query(QuizAnswer).filter_by(question_id="derive-score-variance").one()
    prof.post(f"/instructor/grading/{answer.id}",
              data={f"a{answer.id}-rubric": [rubric[0]["id"]], f"a{answer.id}-comment": "ok"})
    page = ada.get(response.location).get_data(as_text=True)
    assert page.count('<li class="met">') == 1
    assert page.count('<li class="unmet">') == len(rubric) - 1


def _translatable_report(code, task, **_):
    """A report made by the grader's own classes: English messages that keep their templates."""
    from grader.checks.variants import explain
    from grader.grading import CheckResult, GradeReport
    from grader.i18n import T

    wrong = T("{what}: {comparison}.{cause}", what=T("float64 inputs"), cause=T(" Likely cause: {cause}.",
              cause=explain("no_scale")), comparison=T("largest difference from the reference is {error:.3g} at "
              "index {where} (yours {got:.6g}, expected {expected:.6g}; allowed {bound:.2g})", error=1.62,
              where=[2, 0, 4, 7], got=2.60714, expected=0.985897, bound=1.4e-06))
    checks = [CheckResult("load.source", True, 2, 2, T("valid UTF-8 Python")),
              CheckResult("output.float64", False, 0, 4, wrong, {"case": "float64 inputs"}),
              CheckResult("scale.default", False, 0, 8, T("no scaling: the scores are not divided by √d_k"))]
    return GradeReport(task=task, checks=checks, sandbox="none").to_dict()


def test_a_stored_report_is_shown_in_each_readers_language(env, ada, prof):
    sid = _submission_id(ada.post("/tasks/sdpa", data={"code": "x = 1\n"}))
    grade_queued(env, _translatable_report)  # graded once, in English
    pages = {}
    for lang in ("en", "ru", "zh"):
        ada.post("/language", data={"lang": lang})  # the account's language
        pages[lang] = _text(ada.get(f"/submissions/{sid}").get_data(as_text=True))
    assert "Likely cause: you do not scale the scores" in pages["en"]
    assert "no known bug matched: 2 failing checks, first output.float64" in pages["en"]
    assert "Вероятная причина: вы не масштабируете оценки: разделите Q·Kᵀ на √d_k перед softmax" in pages["ru"]
    assert "входы float64: наибольшее отличие от эталона 1.62 в индексе [2, 0, 4, 7]" in pages["ru"]
    assert "ни одна известная ошибка не подошла" in pages["ru"]  # the cause summary
    assert "可能的原因：你没有缩放分数" in pages["zh"] and "没有匹配到已知错误" in pages["zh"]
    assert "Likely cause" not in pages["ru"] + pages["zh"]
    # the instructor reads the same stored report in their own language
    prof.post("/language", data={"lang": "zh"})
    instructor = _text(prof.get(f"/instructor/submissions/{sid}").get_data(as_text=True))
    assert "没有缩放：分数没有除以 √d_k" in instructor and "有效的 UTF-8 Python" in instructor
