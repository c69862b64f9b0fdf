"""Review 3 through Flask's test client. P1: saving a quiz's settings keeps the order the
instructor set (a deadline change must not reorder the quiz by question id), and the settings
page can move a question. P2: a shape typed with a Chinese input method is read; an answer that
cannot be read is explained beside its box, in the reader's language, and stays in the box."""
from __future__ import annotations

import re

from pages_support import ada, db_session, env, prof  # noqa: F401


def _quiz_order(env) -> list[str]:
    from web.models import Assignment
    with db_session(env) as session:
        return list(session.query(Assignment).filter_by(slug="quiz").one().question_ids)


def _form(page: str) -> dict:
    """The settings form as the browser would post it, unchanged."""
    data: dict = {"question_ids": re.findall(r'name="question_ids" value="([^"]+)"[^>]*checked', page)}
    for name, value in re.findall(r'name="(position-[^"]+)"[^>]*value="([^"]*)"', page):
        data[name] = value
    data.update(title="Self-check quiz", late_policy="reject", feedback="full",
                answer_policy="single_try", try_penalty="0.3333")
    return data


def test_review_quiz_order_keeps_moves_and_appends():
    from web.services.review import quiz_order
    current = ["intro", "b", "a", "z"]
    assert quiz_order(current, ["a", "b", "intro", "z"], {}) == (current, {})  # posted in bank order
    assert quiz_order(current, ["a", "intro", "new", "z"], {}) == (["intro", "a", "z", "new"], {})
    # "z" typed as 2: before the question that was second; the others keep their relative order
    moved = {"intro": "1", "b": "2", "a": "3", "z": "2"}
    assert quiz_order(current, current, moved) == (["intro", "z", "b", "a"], {})
    assert quiz_order(current, current, {"a": "first"})[1] == {"a": "first"}
    assert quiz_order(current, current, {"a": "0"})[1] == {"a": "0"}


def test_saving_a_deadline_keeps_the_quiz_order(env, prof):
    before = _quiz_order(env)
    assert before != sorted(before)  # the seeded course order is a teaching order, not an id order
    page = prof.get("/instructor/assignments/quiz/settings").get_data(as_text=True)
    # the quiz's questions come first on the page, in the quiz's order, numbered
    listed = re.findall(r'name="question_ids" value="([^"]+)"', page)
    assert listed[:len(before)] == before
    data = _form(page)
    data["deadline"] = "2030-01-15T12:00"
    assert prof.post("/instructor/assignments/quiz/settings", data=data).status_code == 302
    assert _quiz_order(env) == before

    # a question ticked later goes to the end; one moved goes where its number says
    extra = next(qid for qid in listed if qid not in before)
    data = _form(prof.get("/instructor/assignments/quiz/settings").get_data(as_text=True))
    data["question_ids"].append(extra)
    data[f"position-{before[-1]}"] = "1"
    assert prof.post("/instructor/assignments/quiz/settings", data=data).status_code == 302
    assert _quiz_order(env) == [before[-1], *before[:-1], extra]

    # a position that is not a number is refused with a message, and nothing changes
    data = _form(prof.get("/instructor/assignments/quiz/settings").get_data(as_text=True))
    data[f"position-{before[0]}"] = "x"
    refused = prof.post("/instructor/assignments/quiz/settings", data=data)
    assert refused.status_code == 200 and "is not a whole number" in refused.get_data(as_text=True)
    assert _quiz_order(env) == [before[-1], *before[:-1], extra]


SHAPE = "split-heads-shape"


def _shape_quiz(env, prof, ada, lang):
    from questions.answers import solution
    from questions.model import load_bank
    from questions.variants import variant_seed
    from web.config import quiz_secret
    from web.services.users import find_user
    prof.post("/instructor/assignments/quiz/settings", data={
        "title": "Shapes", "visible": "y", "late_policy": "reject", "feedback": "full",
        "question_ids": [SHAPE, "head-dimension"]})
    ada.post("/language", data={"lang": lang, "next": "/"})
    ada.post("/quiz/quiz/start")
    with db_session(env) as session:
        key = f"user:{find_user(session, 'ada@example.org').id}"
    return solution(load_bank().get(SHAPE), variant_seed(key, SHAPE, quiz_secret(env.config)))["shape"]


def test_a_shape_typed_with_a_chinese_input_method_is_read(env, prof, ada):
    shape = _shape_quiz(env, prof, ada, "zh")
    typed = "（" + "，".join(chr(ord("０") + int(d)) if len(str(n)) == 1 else str(n)
                            for n in shape for d in [str(n)[0]]) + "）"
    page = ada.post(f"/quiz/quiz/questions/{SHAPE}", data={f"q-{SHAPE}-expression": typed},
                    follow_redirects=True).get_data(as_text=True)
    assert re.search(rf'id="q-{SHAPE}".*?class="feedback correct"', page, re.S), typed


def test_an_unreadable_answer_is_explained_beside_its_box_and_kept(env, prof, ada):
    _shape_quiz(env, prof, ada, "zh")
    typed = "（2；8）二"
    response = ada.post(f"/quiz/quiz/questions/{SHAPE}", data={f"q-{SHAPE}-expression": typed})
    assert response.location.endswith(f"#q-{SHAPE}")
    page = ada.get("/quiz/quiz").get_data(as_text=True)
    box = re.search(rf'<article class="question" id="q-{SHAPE}">(.*?)</article>', page, re.S).group(1)
    refused = re.search(r'<p class="error answer-refused" id="refused-[^"]+" role="alert">(.*?)</p>', box, re.S)
    assert refused, box
    assert "不是" in refused.group(1) and "shape" not in refused.group(1)  # Chinese, not English
    assert f'value="{typed}"' in box and 'aria-invalid="true"' in box  # the answer stays in its box
    assert 'class="flash flash-error"' not in page  # nothing at the top, out of view
    # no try was counted, and the next page load is clean
    again = ada.get("/quiz/quiz").get_data(as_text=True)
    assert "answer-refused" not in again and f'value="{typed}"' not in again


def test_an_ordering_capped_by_its_misconception_says_so_in_its_first_line():
    """P9: "9 of 10 pairs right" beside 0.2 / 1 read as a contradiction; the first line now
    gives the cap and its reason, in each language."""
    from grader.i18n import render
    from questions.answers import grade_answer
    from questions.model import load_bank
    question = load_bank().get("sdpa-steps-order")
    swapped = ["project", "scores", "softmax", "mask", "values"]  # the mask after the softmax
    result = grade_answer(question, 1, swapped, "en")
    assert result.points == 0.2 * question.points
    first = {lang: render(result.to_dict()["feedback_i18n"], lang).splitlines()[0] for lang in ("en", "ru", "zh")}
    assert first["en"].startswith("9 of 10 pairs") and f"caps the score at 0.2 of {question.points:g}" in first["en"]
    assert "не выше 0,2 из" in first["ru"] and "最多为 0.2 /" in first["zh"]
    plain = grade_answer(question, 1, ["scores", "project", "mask", "softmax", "values"], "en")
    assert "caps" not in render(plain.to_dict()["feedback_i18n"], "en")  # no cap, no mention


def _masked_case_report(code, task, **_):
    """A failing case as the grader reports it: the case a translatable template inside the
    message, English in the details (grader/checks/calls.py)."""
    from grader.grading import CheckResult, GradeReport
    from grader.i18n import T
    what = T("boolean mask ({L}, {S}) broadcast over batch and heads", L=11, S=9)
    checks = [CheckResult("mask.bool_broadcast", False, 0, 6,
                          T("{what}: {comparison}.{cause}", what=what, comparison="largest error 0.5", cause=""),
                          {"case": what, "mask": "boolean mask of shape (11, 9)", "shapes": "query (3, 11, 8)"})]
    return GradeReport(task=task, checks=checks, sandbox="none").to_dict()


def test_a_failing_checks_details_are_in_the_readers_language(env, ada):
    """P4: the details panel's heading, its case and mask facts and the heatmap caption followed
    the English of the grader's details while the table row above them was translated."""
    from grader.i18n import render, T
    from pages_support import grade_queued
    response = ada.post("/tasks/sdpa", data={"code": "def scaled_dot_product_attention(q, k, v): ...\n"})
    sid = int(response.location.rsplit("/", 1)[1])
    grade_queued(env, _masked_case_report)
    case = T("boolean mask ({L}, {S}) broadcast over batch and heads", L=11, S=9)
    for lang, mask in (("ru", "булева маска формы (11, 9)"), ("zh", "形状为 (11, 9) 的布尔掩码")):
        ada.post("/language", data={"lang": lang, "next": "/"})
        page = ada.get(f"/submissions/{sid}").get_data(as_text=True)
        detail = re.search(r'<details class="check-detail.*?</details>', page, re.S).group(0)
        assert render(case, lang) in re.search(r"<summary>(.*?)</summary>", detail, re.S).group(1)
        assert "broadcast over batch" not in detail
        assert mask in detail


def test_built_in_titles_are_in_the_readers_language_and_typed_ones_as_typed(env, ada, prof):
    """P6: the built-in assignment titles follow the reader's language; a title the instructor
    typed is theirs and is shown as typed (the model docs/instructors/web-app.md gives)."""
    from grader.tasks import TASKS
    from types import SimpleNamespace

    from web.services.courses import QUIZ_TITLE, shown_title
    with env.app.test_request_context():  # none left out: every built-in title has its Chinese
        from flask import session
        session["lang"] = "zh"
        for title in [t.title for t in TASKS.values()] + [QUIZ_TITLE]:
            shown = shown_title(SimpleNamespace(title=title))
            assert shown != title and any("\u4e00" <= ch <= "\u9fff" for ch in shown), (title, shown)
    ada.post("/language", data={"lang": "zh", "next": "/"})
    home = ada.get("/").get_data(as_text=True)
    assert "缩放点积注意力" in home and "自测题" in home and "Scaled dot-product attention" not in home
    assert "多头注意力" in ada.get("/tasks/mha").get_data(as_text=True)
    from web.models import Assignment
    with db_session(env) as session:
        session.query(Assignment).filter_by(slug="mha").one().title = "Внимание / Attention (group B)"
        session.commit()
    assert "Внимание / Attention (group B)" in ada.get("/").get_data(as_text=True)


def test_the_task_page_installs_the_package_the_site_serves(env, ada):
    """P11: attn-grader is not on PyPI; the install line names the wheel this site serves (built
    by `make run` into <instance>/dist), and pip can fetch it without signing in."""
    from pathlib import Path
    page = ada.get("/tasks/sdpa").get_data(as_text=True)
    assert 'id="no-wheel"' in page and "pip install attn-grader " not in page  # nothing to hand out yet
    dist = Path(env.config["INSTANCE_PATH"]) / "dist"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "attn_grader-0.1.0-py3-none-any.whl").write_bytes(b"PK\x05\x06" + b"\0" * 18)
    page = ada.get("/tasks/sdpa").get_data(as_text=True)
    line = re.search(r'<pre class="output" id="install-line">pip install (\S+) ', page).group(1)
    assert line == "http://localhost/downloads/attn_grader-0.1.0-py3-none-any.whl"
    anonymous = env.app.test_client()
    served = anonymous.get("/downloads/attn_grader-0.1.0-py3-none-any.whl")
    assert served.status_code == 200 and served.data.startswith(b"PK")
    assert anonymous.get("/downloads/secret_key").status_code == 404


def test_a_hand_computation_key_has_the_precision_the_question_asks():
    """P10: "give each entry to two decimals", then a key of 0.6626 or 0.971682."""
    from questions.model import load_bank
    from questions.review import review
    bank = load_bank()
    grid = review(bank.get("hand-attention-output"), 3, lang="ru")["key_grid"]
    entry = review(bank.get("hand-causal-weight"), 3, lang="en")["key"]
    assert all(re.fullmatch(r"-?\d+(,\d{1,2})?", x) for row in grid for x in row), grid
    assert re.fullmatch(r"-?\d+(\.\d{1,2})?", entry), entry


def _MESSAGE():
    from grader.i18n import T
    return T("{what}: {comparison}.{cause}", comparison="0.25", cause="",
             what=T("boolean mask ({L}, {S}) broadcast over batch and heads", L=11, S=9))


def _unnamed_failure_report(code, task, **_):
    from grader.grading import CheckResult, GradeReport
    from grader.i18n import T
    checks = [CheckResult("mask.bool_broadcast", False, 0, 6, _MESSAGE())]
    return GradeReport(task=task, checks=checks, sandbox="none").to_dict()


def test_common_mistakes_examples_are_in_the_readers_language(env, ada, prof):
    """P5: "例如： with scale=0.04095 at d_k=32: your function ignores scale= …" on the zh page."""
    from grader.i18n import render
    from pages_support import grade_queued
    ada.post("/tasks/sdpa", data={"code": "def scaled_dot_product_attention(q, k, v): ...\n"})
    grade_queued(env, _unnamed_failure_report)
    message = _MESSAGE()
    for lang in ("ru", "zh"):
        prof.post("/language", data={"lang": lang})
        page = prof.get("/instructor/assignments/sdpa").get_data(as_text=True)
        assert render(message, lang) in page and str(message) not in page, lang


def _knock_on_report(code, task, **_):
    from grader.grading import CheckResult, GradeReport
    checks = [CheckResult("scale.default", False, 0, 8, "no scaling", {"diagnosis": "no_scale"}),
              CheckResult("output.float64", False, 4, 4, "wrong values",
                          {"diagnosis": "no_scale", "because_of": "no_scale"})]
    return GradeReport(task=task, checks=checks, sandbox="none").to_dict()


def test_a_failure_a_counted_bug_explains_is_not_a_red_cross_beside_full_points(env, ada):
    """P14: eleven red ✗ beside "8 / 8" read as lost points; they are grey, pointing at the bug."""
    from pages_support import grade_queued
    response = ada.post("/tasks/sdpa", data={"code": "def scaled_dot_product_attention(q, k, v): ...\n"})
    grade_queued(env, _knock_on_report)
    page = ada.get(response.location).get_data(as_text=True)
    rows = dict(re.findall(r'<tr class="(\w+)">\s*<td class="mark"[^>]*>(.)</td>\s*<td><code>([\w.]+)', page)
                and [(c, (s, m)) for s, m, c in re.findall(
                    r'<tr class="(\w+)">\s*<td class="mark"[^>]*>(.)</td>\s*<td><code>([\w.]+)', page)])
    assert rows == {"scale.default": ("fail", "✗"), "output.float64": ("explained", "↑")}, rows


def test_small_seams_of_the_instructor_pages(env, ada, prof):
    """N16: the bank's folder without the server's absolute path; P16: a quiz attempt numbered
    as its student numbers it; P17: no full stop after a quoted comment; P21: the LTI page says
    that a loopback address is out of an LMS's reach."""
    from pathlib import Path
    from pages_support import grade_queued
    questions = prof.get("/instructor/questions").get_data(as_text=True)
    assert "questions/bank" in questions and str(Path.cwd().anchor + "work") not in questions
    ada.post("/quiz/quiz/start")
    ada.post("/quiz/quiz/questions/derive-score-variance", data={"q-derive-score-variance-text": "Var = d_k"})
    ada.post("/quiz/quiz/submit", data={"confirmed": "yes"})
    bob_attempt = env.app.test_client()
    bob_attempt.post("/sign-in", data={"email": "bob@example.org", "password": "correct horse"})
    bob_attempt.post("/quiz/quiz/start")  # an earlier attempt id that is not ada's
    queue = prof.get("/instructor/grading").get_data(as_text=True)
    assert "Attempt 1" in queue and "attempt #" not in queue
    response = ada.post("/tasks/sdpa", data={"code": "def scaled_dot_product_attention(q, k, v): ...\n"})
    sid = int(response.location.rsplit("/", 1)[1])
    grade_queued(env)
    prof.post(f"/instructor/submissions/{sid}/override", data={"points": "5", "comment": "See office hours."})
    page = prof.get(f"/instructor/submissions/{sid}").get_data(as_text=True)
    assert "“See office hours.”" in page and "“See office hours.”." not in page
    lti = prof.get("/instructor/lti").get_data(as_text=True)
    assert 'id="loopback-note"' in lti


def test_an_explained_failure_keeps_its_pictures_unfolded(env):
    """The grey ↑ rows (P14) still open their heatmaps: the pictures show the counted bug."""
    from web.pages.results import describe_checks
    weights = {"weights_submission": [[[0.5, 0.5]]]}
    checks = [{"id": "scale.default", "passed": False, "points": 0, "max_points": 8, "details": {}},
              {"id": "mask.bool", "passed": False, "points": 4, "max_points": 4,
               "details": {"because_of": "no_scale", **weights}}]
    with env.app.test_request_context():
        described = describe_checks(checks)
    assert [c.get("open", False) for c in described] == [True, True]
    assert [c["state"] for c in described] == ["fail", "explained"]


def test_counts_read_as_russian_plurals_for_one_few_and_many(env, ada, prof):
    """P17: "(s)" plurals became ngettext; Russian has three forms (1 решение, 3 решения, 5 решений),
    as the catalogue's Plural-Forms header declares them."""
    from flask_babel import force_locale, ngettext
    from web.services.users import find_user
    with db_session(env) as session:
        find_user(session, "prof@example.org").locale = "ru"
        session.commit()
    submitted = 0
    for n, button in ((1, "Перепроверить 1 решение"), (3, "Перепроверить 3 решения"), (5, "Перепроверить 5 решений")):
        while submitted < n:
            ada.post("/tasks/sdpa", data={"code": f"def scaled_dot_product_attention(q, k, v): ...  # {submitted}\n"})
            submitted += 1
        page = prof.post("/instructor/assignments/sdpa/regrade").get_data(as_text=True)
        assert re.search(rf">\s*{button}\s*<", page) and "(s)" not in page, page
    with env.app.test_request_context(), force_locale("ru"):
        awaiting = [ngettext("%(num)d answer awaits grading.", "%(num)d answers await grading.", n) for n in (1, 3, 5)]
        kept = [ngettext("%(num)d score you overrode by hand stays as you set it.",
                         "%(num)d scores you overrode by hand stay as you set them.", n) for n in (1, 3, 21)]
    assert awaiting == ["1 ответ ждёт проверки.", "3 ответа ждут проверки.", "5 ответов ждут проверки."]
    assert [k.split(",")[0] for k in kept] == ["1 оценка", "3 оценки", "21 оценка"]


def test_the_editor_and_the_starter_file_speak_the_readers_language(env, ada):
    """P18: the starter's comments and docstring follow the reader, on the page as in the CLI."""
    from html import unescape

    from grader.tasks import template
    from web.services.users import find_user
    assert template("sdpa", "en") in unescape(ada.get("/tasks/sdpa").get_data(as_text=True))
    with db_session(env) as session:
        find_user(session, "ada@example.org").locale = "ru"
        session.commit()
    page = unescape(ada.get("/tasks/sdpa").get_data(as_text=True))
    assert template("sdpa", "ru") in page and "Check it locally with" not in page
    starter = ada.get("/tasks/sdpa/starter.py").get_data(as_text=True)
    assert starter == template("sdpa", "ru") and "Проверьте локально:" in starter
