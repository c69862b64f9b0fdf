"""End to end in headless Chromium, in English, Russian and Chinese: a real server, real
grading workers, real clicks.

For each language a student signs up choosing it, signs out and in again, opens the task,
downloads the starter file, submits a correct file (upload) and a wrong one (typed into the
editor), watches the result pages update by themselves and reads the diagnosis with its
pictures; answers the quiz (a number, a wrong code answer whose expected-vs-got appears
without a reload, a free text) and submits it. Then an instructor working in the same
language sees the scores, grades the free-text answer, overrides the wrong submission's score
and exports the Canvas CSV; the student sees the grade and the override's comment.

The assertions are on structure and state (ids, forms, ``<html lang>``, scores), not on
English words, so they hold whatever the catalogues say; where a catalogue already translates
a label, the label must appear in that language. One server, one browser for the whole file.
Screenshots (laptop 1366×900, a few pages at phone 390×844) go to ``$BROWSER_SHOTS`` or
``artifacts/screenshots/``; the folder is printed at the end of the run.

Skips with the reason when Chromium (Debian's ``chromium``) or Playwright is missing.
"""
from __future__ import annotations

import csv
import io
import re
import zipfile
from pathlib import Path

import pytest

from browser_support import (LAPTOP, PHONE, ROOT, expect_label, expect_lang, new_page, phone_shot,  # noqa: F401
                             server, shot, sign_in, submission_url, wait_graded)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CORPUS = ROOT / "grader" / "tasks" / "sdpa" / "corpus"
LANGS = ("en", "ru", "zh")
# one student per language, named as people of that language are (the Canvas CSV's
# "Last, First" splits the first two; a Chinese name typed without a space stays whole)
STUDENTS = {
    "en": {"name": "Grace Hopper", "sortable": "Hopper, Grace"},
    "ru": {"name": "Софья Ковалевская", "sortable": "Ковалевская, Софья"},
    "zh": {"name": "张伟", "sortable": "张伟"},
}
PASSWORD = "tensor-shapes-42"
INSTRUCTOR = {"email": "prof@example.org", "password": "correct horse"}  # seed_people's
CORRECT_FILE = CORPUS / "correct" / "einsum.py"
WRONG_FILE = CORPUS / "buggy" / "scale_constant_64.py"
NUMERIC_QUESTION, FREE_TEXT_QUESTION = "head-dimension", "derive-score-variance"
CHOICE_QUESTION, UNANSWERED_QUESTION = "sqrt-not-dk", "soft-lookup"  # one answered, one left blank
CODE_QUESTION = "causal-mask-code"
WRONG_MASK = "import torch\n\ndef causal_mask(L, S):\n    return torch.ones(L, S, dtype=torch.bool).triu()\n"


def email(lang: str) -> str:
    return f"student-{lang}@example.org"


@pytest.mark.parametrize("lang", LANGS)
def test_student_journey(server, lang):
    base, person, state = server["base"], STUDENTS[lang], server.setdefault(lang, {})
    page = new_page(server)
    page.goto(base + "/")
    assert "/sign-in" in page.url  # anonymous visitors are sent to sign in
    if lang == "en":
        shot(page, "01-sign-in")
    page.click("nav a[href$='/sign-up']")
    page.fill("#name", person["name"])
    page.fill("#email", email(lang))
    page.fill("#password", PASSWORD)
    page.fill("#confirm", PASSWORD)
    page.select_option("select#lang", lang)  # the account's language, chosen once
    if lang == "en":
        shot(page, "01b-sign-up")
    page.click("main form button[type=submit]")
    page.wait_for_selector(".cards .assignment")
    assert person["name"] in page.locator(".flash-success").inner_text()  # welcomed by name
    expect_lang(page, lang)
    expect_label(page, lang, "nav", "Assignments")
    # the language stays the account's: signed out and in again
    page.click("nav form[action$='/sign-out'] button")
    page.wait_for_url("**/sign-in*")
    sign_in(page, base, email(lang), PASSWORD)
    expect_lang(page, lang)
    assert page.locator(".assignment").count() >= 3
    shot(page, f"{lang}-02-home")

    # The task page: the spec, the editor, the starter file; a correct file by upload.
    page.click(".assignment:has(.kind-task) a.button >> nth=0")
    page.wait_for_selector(".CodeMirror")  # the textarea became an editor
    expect_lang(page, lang)
    assert page.locator(".markdown h1, .markdown h2, .markdown p").count() > 0
    # the spec's code (the signature) wraps in its column: nothing hidden behind a scroll bar
    assert page.evaluate("[...document.querySelectorAll('.markdown pre')].every(p => p.scrollWidth <= p.clientWidth)")
    expect_label(page, lang, "#submit-form button[type=submit]", "Submit for grading")
    # the editor has the width for a signature at laptop size (it was ~420 px and cut it)
    assert page.evaluate("document.querySelector('.CodeMirror').getBoundingClientRect().width") >= 600
    task_url = page.url
    shot(page, f"{lang}-03-task")
    if lang == "en":  # a file over the limit is refused before it is sent: the editor keeps its text
        editor_text = "document.querySelector('.CodeMirror').CodeMirror.getValue()"
        typed = page.evaluate(editor_text)
        limit = page.get_attribute("#submit-form", "data-max-bytes")
        page.set_input_files("#upload", {"name": "big.py", "mimeType": "text/x-python",
                                         "buffer": b"#" * 1_048_576})
        page.click("#submit-form button[type=submit]")
        page.wait_for_selector("#size-error:not([hidden])")
        assert limit in page.locator("#size-error").inner_text() and page.url == task_url
        assert page.evaluate(editor_text) == typed
        page.set_input_files("#upload", [])
    with page.expect_download() as download:
        page.click("a[download][href$='/starter.py']")
    assert "def " in Path(download.value.path()).read_text()
    page.set_input_files("#upload", str(CORRECT_FILE))
    page.click("#submit-form button[type=submit]")
    correct_url = submission_url(page)
    assert page.locator("h1 .badge").count() == 1

    # A wrong file typed into the editor (the textarea is what the form posts), sent while
    # the first is still being graded: two workers take one each.
    page.goto(task_url)
    page.wait_for_selector(".CodeMirror")
    page.evaluate("src => document.querySelector('.CodeMirror').CodeMirror.setValue(src)",
                  WRONG_FILE.read_text())
    page.click("#submit-form button[type=submit]")
    wrong_url = submission_url(page)
    wait_graded(page)
    assert page.locator("table.checks tr.fail").count() >= 1
    detail = page.locator("details.check-detail.fail").first
    assert detail.is_visible()
    assert detail.locator(".facts dt").count() > 0  # the failing case, its error, ...
    # pictures: the attention heatmaps and the logit variance against d_k
    for kind in ("weights", "variance"):
        img = page.locator(f"img[src*='/{kind}.svg']").first
        img.scroll_into_view_if_needed()
        page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=img.element_handle())
    assert page.locator(".diff").count() == 1  # the change since the previous attempt
    expect_lang(page, lang)
    shot(page, f"{lang}-05-result-wrong")

    page.goto(correct_url)
    wait_graded(page)
    score = page.locator("#result .score strong").inner_text()
    assert score.split("/")[0].strip() == score.split("/")[1].strip(), score  # full marks
    # no failure mark on full marks: an optional, unscored check that did not pass (fully
    # masked rows: zeros, not NaN) gets a neutral one
    assert page.locator("table.checks tr.fail").count() == 0
    assert "✗" not in page.locator("#result").inner_text()
    shot(page, f"{lang}-04-result-correct")

    # The quiz, in the account's language.
    page.goto(base + "/")
    page.click(".assignment:has(.kind-quiz) a.button >> nth=0")
    page.wait_for_load_state()
    expect_lang(page, lang)
    page.click("form[action$='/start'] button[type=submit]")
    numeric = page.locator(f"#q-{NUMERIC_QUESTION}")
    numeric.wait_for()
    if lang == "ru":
        assert any("\u0400" <= ch <= "\u04ff" for ch in numeric.inner_text())  # Cyrillic
    if lang == "zh":
        assert any("\u4e00" <= ch <= "\u9fff" for ch in numeric.inner_text())  # Han
    # "Check answer" on one question reloads the page: what was typed into another stays
    draft = "a draft typed before checking another question"
    page.locator(f"#q-{FREE_TEXT_QUESTION} textarea").fill(draft)
    numeric.locator("input[type=text]").fill(str(_right_number(server, lang)))
    numeric.locator("button[type=submit]").click()
    page.wait_for_selector(f"#q-{NUMERIC_QUESTION} .feedback.correct")
    # the feedback can be seen while the page is still parsing, before quiz-drafts.js (at the end
    # of the body) has put the draft back: wait for the document, then read
    page.wait_for_load_state("domcontentloaded")
    assert page.locator(f"#q-{FREE_TEXT_QUESTION} textarea").input_value() == draft
    _answer_choice(page, lang)

    # A code answer goes to the grading workers: shown as being graded, then the poller
    # swaps the verdict in without reloading (text typed meanwhile stays put), with the
    # failing call's expected values beside what the function returned.
    code_box = page.locator(f"#q-{CODE_QUESTION}")
    code_box.locator(".CodeMirror").wait_for()
    page.evaluate("([sel, code]) => document.querySelector(sel).CodeMirror.setValue(code)",
                  [f"#q-{CODE_QUESTION} .CodeMirror", WRONG_MASK])
    with page.expect_navigation():  # the answer is a form post: type nothing before its page is back
        code_box.locator("button[type=submit]").click()
    page.wait_for_selector(f"#q-{CODE_QUESTION} .feedback.pending")
    free = page.locator(f"#q-{FREE_TEXT_QUESTION}")
    free.locator("textarea").fill("Var(q·k) = d_k, so we divide by √d_k. <script>alert(1)</script>")
    page.wait_for_selector(f"#q-{CODE_QUESTION} .feedback.wrong, #q-{CODE_QUESTION} .feedback.partial",
                           timeout=90_000)
    assert "alert(1)" in free.locator("textarea").input_value()  # no reload happened
    failure = page.locator(f"#failure-{CODE_QUESTION}")
    assert failure.locator(".tensor-view.expected table.values td").count() > 0
    assert failure.locator(".tensor-view.got table.values td").count() > 0
    free.locator("button[type=submit]").click()
    page.wait_for_selector(f"#q-{FREE_TEXT_QUESTION} .feedback.pending")
    failure.scroll_into_view_if_needed()
    shot(page, f"{lang}-06-quiz", full_page=False)
    expect_label(page, lang, "#submit-quiz button[type=submit]", "Submit the quiz")
    # questions are left blank: the warning above the button names them, and no dialog stops the
    # click (an LMS-driven browser dismisses dialogs)
    warning = page.locator("#unanswered-warning")
    assert warning.is_visible() and re.search(r"\d", warning.inner_text()), warning.inner_text()
    page.on("dialog", lambda dialog: dialog.dismiss())
    page.click("#submit-quiz button[type=submit]")
    page.wait_for_url("**/quiz/attempts/*")
    expect_lang(page, lang)
    _expect_final_review(page, lang)
    assert page.locator(f"#q-{FREE_TEXT_QUESTION} .feedback.pending").count() == 1  # awaiting review
    assert "<script>alert(1)</script>" in page.locator(f"#q-{FREE_TEXT_QUESTION} .answer-text").inner_text()

    storage = page.context.storage_state()
    phone_shot(server, storage, wrong_url, f"{lang}-07-result-wrong-phone")
    phone_shot(server, storage, page.url, f"{lang}-08-quiz-attempt-phone")
    if lang == "en":
        phone_shot(server, storage, task_url, "en-09-task-phone")
    state.update(storage=storage, wrong_url=wrong_url, attempt_url=page.url, task_url=task_url,
                 correct_url=correct_url)
    page.context.close()


def _answer_choice(page, lang: str) -> None:
    """A choice question answered: once final it shows every option, the pick and the key
    marked in words, the picked option's feedback beside it, and the worked solution."""
    box = page.locator(f"#q-{CHOICE_QUESTION}")
    box.locator("input[type=radio]").first.check()
    with page.expect_navigation():
        box.locator("button[type=submit]").click()
    review = page.locator(f"#q-{CHOICE_QUESTION} .review")
    review.wait_for()
    assert review.locator("li.picked .option-feedback").count() == 1
    assert review.locator("li.key .option-feedback").count() >= 1
    assert review.locator(".solution").count() == 1
    expect_label(page, lang, f"#q-{CHOICE_QUESTION} li.picked .tag-picked", "your answer")
    expect_label(page, lang, f"#q-{CHOICE_QUESTION} .solution", "Worked solution")


def _expect_final_review(page, lang: str) -> None:
    """The submitted attempt, in the reader's language: the answered choice with pick, key and
    solution; the number beside the right one; a blank question with its key."""
    choice = page.locator(f"#q-{CHOICE_QUESTION} .review")
    assert choice.locator("li.picked").count() == 1 and choice.locator("li.key").count() >= 1
    assert choice.locator(".solution").count() == 1
    expect_label(page, lang, f"#q-{CHOICE_QUESTION} li.key .tag-key", "right answer")
    numeric = page.locator(f"#q-{NUMERIC_QUESTION} .review")
    assert numeric.locator("dd.yours").inner_text().strip() == numeric.locator("dd.key code").inner_text().strip()
    assert numeric.locator(".solution").count() == 1
    blank = page.locator(f"#q-{UNANSWERED_QUESTION} .review")
    assert blank.locator("li.key").count() == 1 and blank.locator("li.picked").count() == 0
    page.locator(f"#q-{CHOICE_QUESTION}").scroll_into_view_if_needed()
    shot(page, f"{lang}-06b-quiz-attempt-review", full_page=False)


def _right_number(server, lang: str) -> float:
    """The numeric question's answer for this student's variant, computed as the server does."""
    from questions.answers import solution
    from questions.model import load_bank
    from questions.variants import variant_seed
    from web.config import quiz_secret
    from web.db import session_factory
    from web.services.users import find_user

    with session_factory(server["engine"])() as session:
        key = f"user:{find_user(session, email(lang)).id}"
    seed = variant_seed(key, NUMERIC_QUESTION, quiz_secret(server["config"]))
    return solution(load_bank().get(NUMERIC_QUESTION), seed)["value"]


@pytest.mark.parametrize("lang", LANGS)
def test_instructor_journey(server, lang):
    base, person, state = server["base"], STUDENTS[lang], server.get(lang)
    if not state:
        pytest.skip(f"the {lang} student journey did not finish")
    page = new_page(server)
    sign_in(page, base, INSTRUCTOR["email"], INSTRUCTOR["password"])
    page.goto(base + "/account")
    page.wait_for_load_state()  # the select submits itself from a deferred script
    page.select_option("#lang", lang)
    page.wait_for_selector(f"html[lang={lang}]")
    expect_label(page, lang, "nav", "Scores")

    # The score matrix: the student's full marks on the task, the quiz awaiting review.
    page.goto(base + "/instructor/")
    page.fill("#q", email(lang))
    page.locator("#q").press("Enter")
    page.wait_for_url("**q=*")
    rows = page.locator("#score-matrix tbody tr")
    assert rows.count() == 1
    cells = rows.first.inner_text()
    assert re.search(r"\b100\b", cells), cells
    assert rows.first.locator(".badge-awaiting-review").count() == 1
    # every assignment's column fits a laptop: the headers wrap instead of running over
    assert page.evaluate("(w => w.scrollWidth <= w.clientWidth)(document.querySelector('#score-matrix').closest('.table-wrap'))")
    expect_lang(page, lang)
    shot(page, f"{lang}-10-instructor-scores")
    if lang != "en":
        phone_shot(server, page.context.storage_state(), page.url, f"{lang}-11-instructor-scores-phone")

    # The Canvas CSV: the student as "Last, First", their e-mail as SIS Login ID.
    with page.expect_download() as download:
        page.click("a[href*='layout=canvas']")
    canvas = list(csv.reader(io.StringIO(Path(download.value.path()).read_text(encoding="utf-8"))))
    assert canvas[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert canvas[1][0].strip() == "Points Possible"
    row = next(r for r in canvas if r[3] == email(lang))
    assert row[0] == person["sortable"]

    if lang == "en":  # the question bank's export, as an LMS would import it
        page.goto(base + "/instructor/questions")
        with page.expect_download() as download:
            page.click("#question-export button[value=qti]")
        with zipfile.ZipFile(download.value.path()) as package:
            assert "imsmanifest.xml" in package.namelist()

    # The grading queue: tick rubric items, comment, save; the answer leaves the queue.
    page.goto(base + "/instructor/grading")
    item = page.locator(".grading-item", has_text=email(lang))
    assert "<script>alert(1)</script>" in item.locator(".answer-text").inner_text()
    boxes = item.locator("input[type=checkbox]")
    boxes.nth(0).check()
    boxes.nth(1).check()
    item.locator("textarea").fill("Good derivation; say why saturation hurts the gradients.")
    shot(page, f"{lang}-12-instructor-grading")
    item.locator("button[type=submit]").click()
    page.wait_for_selector(".flash-success")
    assert page.locator(".grading-item", has_text=email(lang)).count() == 0

    # The wrong submission's page: actions first, then an override with a comment.
    sid = state["wrong_url"].rstrip("/").rsplit("/", 1)[1]
    page.goto(f"{base}/instructor/submissions/{sid}")
    assert page.locator("#actions").bounding_box()["y"] < LAPTOP["height"]  # no scrolling for it
    assert page.locator("table.checks tr.fail").count() >= 1
    # the check table and the code fit a laptop's width: nothing clipped behind a scroll bar
    assert page.evaluate("[...document.querySelectorAll('.table-wrap, .code')].every(e => e.scrollWidth <= e.clientWidth)")
    page.fill("#override-form #points", "95")
    page.fill("#override-form #comment", "Accepted: the constant matches d_k = 64 here.")
    page.click("#override-form button[type=submit]")
    page.wait_for_selector("#overridden")
    assert "95" in page.locator("#actions .score strong").inner_text()
    expect_lang(page, lang)
    shot(page, f"{lang}-13-instructor-submission")
    page.context.close()

    # The student sees the instructor's points and comment on both.
    student = new_page(server, state["storage"])
    student.goto(state["attempt_url"])
    feedback = student.locator(f"#q-{FREE_TEXT_QUESTION} .feedback")
    assert "2 / 4" in feedback.inner_text()
    assert "saturation hurts the gradients" in feedback.inner_text()
    assert student.locator(f"#q-{FREE_TEXT_QUESTION} .rubric li.met").count() == 2
    shot(student, f"{lang}-14-quiz-graded")
    student.goto(state["wrong_url"])
    assert "the constant matches d_k = 64" in student.locator("#override").inner_text()
    student.context.close()


def _instructor_page(server, lang: str = "en"):
    page = new_page(server)
    sign_in(page, server["base"], INSTRUCTOR["email"], INSTRUCTOR["password"])
    page.goto(server["base"] + "/account")
    page.wait_for_load_state()
    if page.locator("html").get_attribute("lang") != lang:
        page.select_option("#lang", lang)
        page.wait_for_selector(f"html[lang={lang}]")
    return page


def test_the_instructor_reads_the_students_summary(server):
    state = server.get("en")
    if not state:
        pytest.skip("the en student journey did not finish")
    student = new_page(server, state["storage"])
    student.goto(state["wrong_url"])
    said = student.locator("#result .summary-fail").inner_text()
    student.context.close()
    page = _instructor_page(server)
    page.goto(server["base"] + "/instructor/submissions/" + state["wrong_url"].rstrip("/").rsplit("/", 1)[1])
    assert said and page.locator(".summary-fail").inner_text() == said
    page.context.close()


# Text an instructor must never read: a template's placeholder, a message whose numbers were
# masked, a raw Python list or dict. Code (the students', a question's) is left out: "{'" is fine there.
RAW_TEXT = re.compile(r"\{[a-z_][a-z0-9_]*\}|…, …|\[…|\[['\"]|\{['\"]")
VISIBLE_PROSE = """() => { const body = document.body.cloneNode(true);
  body.querySelectorAll('pre, code, textarea, .code, .CodeMirror, .highlight, script').forEach(e => e.remove());
  return body.innerText; }"""


def test_every_page_fits_a_phone_and_instructor_pages_show_no_raw_text(server):
    """One sweep: each student, instructor and LTI page at 390 px without sideways scrolling;
    each instructor page without placeholders or raw structures; the similarity pair's long
    lines inside their cards."""
    base, state = server["base"], server.get("en")
    if not state:
        pytest.skip("the en student journey did not finish")
    page = _instructor_page(server)
    page.goto(base + "/instructor/assignments/sdpa/similarity/")
    page.click("main form button[type=submit]")
    # the report page refreshes itself while it computes; the three students' latest files pair up
    page.wait_for_selector("#similar-pairs, #no-pairs", timeout=60_000)
    pairs = page.locator("#similar-pairs a[href*='/pairs/']")
    pair_url = base + pairs.first.get_attribute("href") if pairs.count() else None
    page.goto(base + "/instructor/questions")
    question_url = base + page.locator("a[href*='/instructor/questions/']").first.get_attribute("href")
    page.goto(base + "/instructor/")
    student_url = base + page.locator("#score-matrix a[href*='/instructor/students/']").first.get_attribute("href")
    sid = state["wrong_url"].rstrip("/").rsplit("/", 1)[1]
    instructor = [base + path for path in (
        "/instructor/", "/instructor/assignments/sdpa", "/instructor/assignments/quiz",
        "/instructor/assignments/sdpa/settings", "/instructor/assignments/quiz/settings",
        f"/instructor/submissions/{sid}", "/instructor/grading", "/instructor/questions",
        "/instructor/jobs", "/instructor/sign-up/", "/instructor/assignments/sdpa/similarity/",
        "/instructor/lti")] + [question_url, student_url] + ([pair_url] if pair_url else [])
    raw = []
    for url in instructor:
        page.goto(url)
        raw += [(url, m.group(0)) for m in RAW_TEXT.finditer(page.evaluate(VISIBLE_PROSE))]
        if url == pair_url:
            assert page.evaluate("[...document.querySelectorAll('.similarity-code')]"
                                 ".every(e => e.scrollWidth <= e.clientWidth)")
            shot(page, "en-15-instructor-similarity-pair", full_page=False)
    instructor_storage = page.context.storage_state()
    page.context.close()

    student = [state["task_url"], state["wrong_url"], state["correct_url"], state["attempt_url"],
               base + "/", base + "/quiz/quiz", base + "/account"]
    wide = []
    for storage, urls in ((state["storage"], student), (instructor_storage, instructor)):
        phone = server["browser"].new_context(viewport=PHONE, storage_state=storage, is_mobile=True,
                                              device_scale_factor=1).new_page()
        for url in urls:
            phone.goto(url)
            width = phone.evaluate("document.documentElement.scrollWidth")
            if width > PHONE["width"]:
                wide.append((url, width))
                shot(phone, "phone-too-wide-" + re.sub(r"\W+", "-", url.split("//", 1)[1])[-60:])
        if urls is instructor:
            phone.goto(base + "/instructor/assignments/sdpa")
            shot(phone, "en-16-instructor-stats-phone")
        phone.context.close()
    assert not raw and not wide, {"raw text": raw, "wider than 390 px": wide}
