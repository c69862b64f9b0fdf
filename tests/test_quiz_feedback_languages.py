"""Quiz feedback is stored once (English + template) and shown in each reader's language.

An answer is graded once; the student and the instructor then read it in English, Russian
and Chinese, whatever language it was answered in. Feedback stored before templates were
(plain text) still shows.
"""
from __future__ import annotations

import html
import re

from pages_support import ada, db_session, env, grade_queued, prof  # noqa: F401

NUMERIC, SINGLE = "head-dimension", "why-scale-by-sqrt-dk"
CYRILLIC, CJK = re.compile("[а-яА-Я]"), re.compile("[\u4e00-\u9fff]")


def _rows(env):
    from web.models import QuizAnswer
    with db_session(env) as session:
        return {a.question_id: (a.id, a.seed) for a in session.query(QuizAnswer)}


def _feedback_boxes(page: str) -> str:
    """The text of every feedback box and option feedback on the page (tags dropped, entities
    decoded): once final, an option's feedback stands next to that option."""
    boxes = re.findall(r'<div class="(?:feedback [a-z]+|option-feedback)">(.*?)</div>', page, re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", " ".join(boxes)))


def _view_in(client, lang: str, url: str) -> str:
    client.post("/language", data={"lang": lang})
    return client.get(url).get_data(as_text=True)


def test_an_answer_graded_once_is_read_in_every_language(env, ada, prof):
    from questions.model import load_bank
    from questions.variants import token
    from web.models import Assignment

    bank = load_bank()
    with db_session(env) as session:
        session.query(Assignment).filter_by(slug="quiz").one().question_ids = [NUMERIC, SINGLE]
        session.commit()
    ada.post("/language", data={"lang": "ru"})  # answered in Russian: a decimal comma is read
    ada.post("/quiz/quiz/start")
    seeds = {qid: seed for qid, (_, seed) in _rows(env).items()}
    ada.post(f"/quiz/quiz/questions/{NUMERIC}", data={f"q-{NUMERIC}-number": "1000,5"})
    single = bank.get(SINGLE)
    wrong = next(o for o in single.data["options"] if not o["correct"])
    ada.post(f"/quiz/quiz/questions/{SINGLE}",
             data={f"q-{SINGLE}-choice": token(seeds[SINGLE], SINGLE, wrong["id"])})
    attempt_url = ada.post("/quiz/quiz/submit", data={"confirmed": "yes"}).location

    expected = {"en": ("Your value 1000.5 is too large.", "Not correct."),
                "ru": ("Ваше значение 1000,5 слишком велико.", "Неверно."),
                "zh": ("你的数值 1000.5 偏大。", "不正确。")}
    for client in (ada, prof):  # the student and the instructor, each in their language
        for lang, (numeric, verdict) in expected.items():
            shown = _feedback_boxes(_view_in(client, lang, attempt_url))
            assert numeric in shown and verdict in shown, (lang, shown)
            assert wrong["feedback"][lang].strip()[:25] in shown  # the author's text, this language's
            others = [other for other in expected if other != lang]
            for other in others:
                assert expected[other][1] not in shown and wrong["feedback"][other].strip()[:25] not in shown
            if lang == "en":
                assert not CYRILLIC.search(shown) and not CJK.search(shown)


def test_a_code_answers_verdict_from_the_worker_follows_the_reader(env, ada):
    from web.models import Assignment

    qid = "scaled-scores-code"
    with db_session(env) as session:
        session.query(Assignment).filter_by(slug="quiz").one().question_ids = [qid]
        session.commit()
    ada.post("/language", data={"lang": "zh"})
    ada.post("/quiz/quiz/start")
    unscaled = "def scaled_scores(q, k):\n    return q @ k.transpose(-2, -1)\n"  # no 1/sqrt(d_k)
    ada.post(f"/quiz/quiz/questions/{qid}", data={f"q-{qid}-code": unscaled})
    assert grade_queued(env) == 1  # the grading worker runs the real check, in English
    shown = {lang: _feedback_boxes(_view_in(ada, lang, "/quiz/quiz")) for lang in ("en", "ru", "zh")}
    assert re.search(r"0 of \d+ test calls pass\. First failure, scaled_scores\(.*\): wrong values", shown["en"])
    assert re.search(r"Проходят 0 из \d+ тестовых вызовов\. .*неверные значения", shown["ru"])
    assert re.search(r"\d+ 个测试调用中通过 0 个。.*数值错误", shown["zh"])
    assert "wrong values" not in shown["ru"] + shown["zh"]


def test_feedback_stored_as_plain_text_still_shows(env, ada, prof):
    """Answers graded before templates were keep their text; a known sentence is translated
    whole, anything else (an instructor's comment) is shown as written."""
    from web.models import Assignment, QuizAnswer, QuizAttempt
    from web.services import quizzes
    from web.services.users import find_user

    with db_session(env) as session:
        session.query(Assignment).filter_by(slug="quiz").one().question_ids = [NUMERIC, SINGLE]
        session.commit()
    ada.post("/quiz/quiz/start")
    ada.post(f"/quiz/quiz/questions/{NUMERIC}", data={f"q-{NUMERIC}-number": "7"})
    ada.post(f"/quiz/quiz/questions/{SINGLE}", data={f"q-{SINGLE}-choice": "x"})  # refused: not an option
    attempt_url = ada.post("/quiz/quiz/submit", data={"confirmed": "yes"}).location
    with db_session(env) as session:
        old = session.query(QuizAnswer).filter_by(question_id=NUMERIC).one()
        old.feedback, old.details = "Correct.", {"value": 7.0}  # as stored before templates
        old.correct, old.points = True, old.max_points
        session.commit()
    shown = _feedback_boxes(_view_in(ada, "zh", attempt_url))
    assert "正确。" in shown and "Correct." not in shown

    with db_session(env) as session:  # an instructor's comment replaces a templated feedback
        row = session.query(QuizAnswer).filter_by(question_id=NUMERIC).one()
        row.feedback, row.details = "Your value 7 is too large.", {
            "feedback_i18n": {"t": "Your value {value} is too large.", "a": {"value": {"l": {
                "en": "7", "ru": "7", "zh": "7"}}}}}
        session.commit()
        assert session.query(QuizAttempt).count() == 1
        quizzes.grade_answer_manually(session, find_user(session, "prof@example.org"), row, 0.5,
                                      "Nearly: halve it.")
        session.commit()
    for client in (ada, prof):
        shown = _view_in(client, "ru", attempt_url)
        assert "Nearly: halve it." in shown and "слишком велико" not in shown
