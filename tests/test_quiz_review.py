"""A final quiz question shows the student's answer beside the key, and its solution (issue 28).

N1/N13: once final, the options with the pick and the key marked, each picked or right option's
feedback beside it, the right order and pairs, the worked solution, in the reader's language;
never while tries remain. N11: submitting with unanswered questions asks first. N12: the landing
page says questions, points, tries, attempts and deadline. N6, N16, Q4, Q5: readable statistics,
preview and CSV; no ASCII space after Chinese full-width punctuation.
"""
from __future__ import annotations

import html
import re

import pytest

from pages_support import ada, db_session, env, prof  # noqa: F401

SINGLE, MATCHING, ORDERING, NUMERIC, FREE = ("why-scale-by-sqrt-dk", "qkv-roles", "sdpa-steps-order",
                                             "head-dimension", "derive-score-variance")
QUIZ = [SINGLE, MATCHING, ORDERING, NUMERIC, FREE]
CJK_GAP = re.compile(r"[。，：；！？] ")


@pytest.fixture(scope="module")
def bank():
    from questions.model import load_bank
    return load_bank()


def _key_and_wrong(question, seed):
    """The right answer of a variant and a wrong one, as the quiz form sends them (tokens)."""
    from questions.answers import solution
    from questions.variants import shown_options, token
    sol, kind = solution(question, seed), question.kind
    if kind in ("single", "multiple"):
        wrong = next(o["id"] for o in shown_options(question, seed) if not o["correct"])
        key = sol["tokens"][0] if kind == "single" else sol["tokens"]
        return key, token(seed, question.id, wrong) if kind == "single" else [token(seed, question.id, wrong)]
    if kind == "ordering":
        return sol["order"], sol["order"][::-1]
    if kind == "matching":
        ids = list(sol["pairs"])
        return dict(sol["pairs"]), {a: b for a, b in zip(ids, ids[1:] + ids[:1])}
    if kind in ("numeric",) or kind == "matrix" and "value" in sol:
        return repr(sol["value"]), repr(sol["value"] * 3 + 7)
    if kind == "matrix":
        return sol["matrix"], [[x + 1 for x in row] for row in sol["matrix"]]
    if kind == "shape":
        return str(tuple(sol["shape"])), str(tuple(n + 1 for n in sol["shape"]))
    if kind == "big_o":
        return sol["expression"], "O(1)"
    if kind == "expression":
        return sol["formula"], "0"
    if kind == "code":
        return sol["model_solution"], "def nothing():\n    pass\n"
    return "An answer.", "Another answer."


def test_every_question_of_the_bank_shows_its_key_and_a_solution_when_final(bank):
    """Every kind, right and wrong and unanswered, in three languages: the key is there, a
    picked option is marked with its feedback, and some solution is shown (a worked explanation,
    the right option's reason, a model solution or answer); the verdict never repeats the
    explanation, and nothing is left as a raw placeholder or Python list."""
    from questions.review import review
    from questions.schema import PLACEHOLDER_RE

    seed = 20261203
    kinds = set()
    for question in bank:
        kinds.add(question.kind)
        right, wrong = _key_and_wrong(question, seed)
        for lang in ("en", "ru", "zh"):
            for answer, correct in ((right, True), (wrong, False), (None, None)):
                r = review(question, seed, answer, lang=lang)
                where = (question.id, lang, correct)
                solution = r["explanation"] or r.get("model_solution") or r.get("model_answer") or any(
                    o["correct"] and o["feedback"] for o in r.get("options", []))
                assert solution, where
                if question.kind in ("single", "multiple"):
                    assert any(o["correct"] for o in r["options"]), where
                    picked = [o for o in r["options"] if o["chosen"]]
                    assert bool(picked) == (answer is not None) and all(o["feedback"] for o in picked), where
                    assert all(o["correct"] for o in picked) == (correct is not False), where
                elif question.kind == "ordering":
                    assert len(r["key_order"]) == len(question.data["items"]), where
                    assert (bool(r["order"]) and all(i["in_place"] for i in r["order"])) == (correct is True), where
                elif question.kind == "matching":
                    assert all(p["key"] for p in r["pairs"]), where
                    assert (answer is not None and all(p["right"] for p in r["pairs"])) == (correct is True), where
                elif question.kind in ("numeric", "shape", "big_o", "expression") or question.kind == "matrix" and "key" in r:
                    assert r["key"] and (r["yours"] is not None) == (answer is not None), where
                elif question.kind == "matrix":
                    assert r["key_grid"], where
                    assert (bool(r["grid"]) and all(c["right"] for row in r["grid"] for c in row)) == (correct is True)
                if answer is not None and question.kind not in ("code", "free_text"):
                    assert r["correct"] is correct and r["head"], where
                    assert not r["explanation"] or r["explanation"] not in r["head"], where
                texts = [r["head"] or "", r["explanation"] or ""] + [
                    o["text"] + (o["feedback"] or "") for o in r.get("options", [])]
                assert not any(PLACEHOLDER_RE.search(t) and "{" + PLACEHOLDER_RE.search(t).group(1) + "}"
                               in t and PLACEHOLDER_RE.search(t).group(1) in question.data.get("params", {})
                               for t in texts), where
    assert {"single", "multiple", "numeric", "ordering", "matching", "matrix", "shape", "big_o", "expression",
            "code", "free_text"} <= kinds


def _use_questions(env, qids, **settings):
    from web.models import Assignment
    with db_session(env) as session:
        quiz = session.query(Assignment).filter_by(slug="quiz").one()
        quiz.question_ids = list(qids)
        for name, value in settings.items():
            setattr(quiz, name, value)
        session.commit()


def _seed(env, qid):
    from questions.variants import variant_seed
    from web.config import quiz_secret
    from web.services.users import find_user
    with db_session(env) as session:
        user_id = find_user(session, "ada@example.org").id
    return variant_seed(f"user:{user_id}", qid, quiz_secret(env.config))


def _article(page: str, qid: str) -> str:
    match = re.search(rf'<article class="question" id="q-{qid}">(.*?)</article>', page, re.S)
    assert match, qid
    return match.group(1)


def _text(fragment: str, tag: str = " ") -> str:
    """What a reader sees of ``fragment``: tags become ``tag`` (a space keeps words apart)."""
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", tag, fragment)))


def test_a_final_answer_shows_pick_key_feedback_and_solution_never_before(env, ada, bank):
    """Several tries: a wrong answer with tries left shows no key; once out of tries the quiz page
    shows the options, the pick, the key, both options' feedback and the worked solution; the
    submitted attempt shows them too, in Russian, with the right order and pairs, and the key of
    an unanswered question."""
    from questions.variants import shown_options, token
    _use_questions(env, QUIZ, answer_policy="penalised_tries", try_penalty=0.5)
    ada.post("/quiz/quiz/start")
    question = bank.get(SINGLE)
    seed = _seed(env, SINGLE)
    options = shown_options(question, seed)
    wrong = [o for o in options if not o["correct"]]
    key = next(o for o in options if o["correct"])
    page = ada.post(f"/quiz/quiz/questions/{SINGLE}", data={f"q-{SINGLE}-choice": token(seed, SINGLE, wrong[0]["id"])},
                    follow_redirects=True).get_data(as_text=True)
    box = _article(page, SINGLE)
    assert 'class="review' not in box and key["feedback"]["en"] not in page  # a try is left: no key
    assert "tag-key" not in box and "tag-picked" not in box
    page = ada.post(f"/quiz/quiz/questions/{SINGLE}", data={f"q-{SINGLE}-choice": token(seed, SINGLE, wrong[1]["id"])},
                    follow_redirects=True).get_data(as_text=True)
    box = _article(page, SINGLE)  # out of tries: final
    assert re.search(r'<li class=" picked">.*?your answer', box, re.S)
    assert re.search(r'<li class="key">.*?right answer', box, re.S)
    assert key["feedback"]["en"] in html.unescape(box) and wrong[1]["feedback"]["en"] in html.unescape(box)
    assert "sent" not in _text(box)

    seed = _seed(env, ORDERING)
    items = bank.get(ORDERING).data["items"]
    order = [token(seed, ORDERING, i["id"]) for i in items][::-1]
    ada.post(f"/quiz/quiz/questions/{ORDERING}", data={f"q-{ORDERING}-pos{n}": t for n, t in enumerate(order)})
    ada.post(f"/quiz/quiz/questions/{ORDERING}", data={f"q-{ORDERING}-pos{n}": t for n, t in enumerate(order)})
    ada.post("/language", data={"lang": "ru"})
    attempt = ada.post("/quiz/quiz/submit", data={"confirmed": "yes"}).location
    page = ada.get(attempt).get_data(as_text=True)
    single = _article(page, SINGLE)
    assert "ваш ответ" in single and "правильный ответ" in single and key["feedback"]["ru"] in html.unescape(single)
    ordering = _text(_article(page, ORDERING))
    assert "Правильный порядок" in ordering and "Разобранное решение" in ordering
    right_order = re.search(r'<ol class="review-key">(.*?)</ol>', _article(page, ORDERING), re.S).group(1)
    assert [t.strip() for t in re.findall(r"<li>(.*?)</li>", right_order)] == \
        [i["text"]["ru"] for i in items]
    matching = _article(page, MATCHING)  # unanswered: the right pairs alone
    assert "Нет ответа." in _text(matching) and "review-pairs unanswered" in matching
    assert all(html.unescape(p["right"]["ru"]) in html.unescape(matching) for p in bank.get(MATCHING).data["pairs"])
    assert bank.get(MATCHING).data["explanation"]["ru"][:20] in html.unescape(matching)


def test_submitting_with_unanswered_questions_asks_first(env, ada, bank):
    _use_questions(env, QUIZ[:3])
    ada.post("/quiz/quiz/start")
    seed = _seed(env, SINGLE)
    key = next(o for o in bank.get(SINGLE).data["options"] if o["correct"])
    from questions.variants import token
    ada.post(f"/quiz/quiz/questions/{SINGLE}", data={f"q-{SINGLE}-choice": token(seed, SINGLE, key["id"])})
    page = ada.get("/quiz/quiz").get_data(as_text=True)
    assert 'data-unanswered="2"' in page and 'id="unanswered-warning"' in page  # the warning at the button
    assert "2 questions are unanswered (questions 2, 3)" in page
    asked = ada.post("/quiz/quiz/submit")
    text = asked.get_data(as_text=True)
    assert asked.status_code == 200 and "2 questions unanswered" in text and "question 2, 3, of 3" in text
    assert 'name="confirmed" value="yes"' in text
    assert ada.get("/quiz/quiz").get_data(as_text=True).count('class="question"') == 3  # still open
    done = ada.post("/quiz/quiz/submit", data={"confirmed": "yes"})
    assert done.status_code == 302 and "/quiz/attempts/" in done.location


def test_the_landing_page_says_what_the_quiz_holds_before_the_start(env, ada, bank):
    from datetime import datetime
    _use_questions(env, QUIZ, max_attempts=2, deadline=datetime(2030, 5, 1, 12, 0))
    points = sum(bank.get(q).points for q in QUIZ)
    text = _text(ada.get("/quiz/quiz").get_data(as_text=True))
    assert "5 questions" in text and f"{points:g} points in all" in text
    assert "1 free-text answer" in text and "One try per question" in text
    assert "Attempts left: 2 of 2." in text and "Deadline: 2030-05-01 12:00 UTC." in text
    ada.post("/language", data={"lang": "zh"})
    page = ada.get("/quiz/quiz").get_data(as_text=True)
    items = [_text(li, "") for li in re.findall(r"<li>(.*?)</li>", re.search(r'<ul class="outline">(.*?)</ul>', page, re.S).group(1), re.S)]
    assert "共 5 道题" in items[0] and "2030-05-01" in items[3]
    assert not any(CJK_GAP.search(item) for item in items), items


def test_chinese_quiz_sentences_have_no_ascii_space_after_full_width_punctuation(env, ada, bank):
    """Q4: the joined sentences of the quiz page, a verdict with tries left, and the attempt."""
    _use_questions(env, [NUMERIC, SINGLE], answer_policy="penalised_tries")
    ada.post("/language", data={"lang": "zh"})
    ada.post("/quiz/quiz/start")
    page = ada.post(f"/quiz/quiz/questions/{NUMERIC}", data={f"q-{NUMERIC}-number": "3"},
                    follow_redirects=True).get_data(as_text=True)
    intro = _text(re.search(r'<p class="muted">(.*?)</p>', page, re.S).group(1), "")
    verdict = _text(re.search(r'<div class="feedback [a-z]+">(.*?)</div>', _article(page, NUMERIC), re.S).group(1), "")
    assert "还不正确。第" in verdict, verdict  # the tries-left verdict, run together
    for text in (intro, verdict):
        assert not CJK_GAP.search(text), text
    attempt = ada.post("/quiz/quiz/submit", data={"confirmed": "yes"}).location
    summary = re.search(r'<section class="card">\s*<p class="score">.*?</p>\s*<p class="muted">(.*?)</p>',
                        ada.get(attempt).get_data(as_text=True), re.S).group(1)
    assert not CJK_GAP.search(_text(summary, "")), summary


def test_statistics_preview_and_csv_read_as_text(env, prof, bank):
    """N6: no {a} in the answer distribution; N16: the preview lists the options with the key
    marked, not Python lists; Q5: facility rounded in quiz-questions.csv."""
    from web.services.analytics import answer_distribution, question_stats_csv
    labels = [d["label"] for d in answer_distribution(bank.get("permute-inputs"), [])]
    assert labels and not any("{" in label for label in labels) and any("positions a and b" in t for t in labels)
    page = prof.get("/instructor/questions/permute-inputs?seed=2").get_data(as_text=True)
    answer = _text(re.search(r'<section class="card" id="answer".*?</section>', page, re.S).group(0))
    assert "right answer" in answer and "['" not in answer
    from questions.variants import shown_options
    assert page.count('class="option-feedback"') == len(shown_options(bank.get("permute-inputs"), 2)) > 1
    csv = question_stats_csv([{"position": 1, "question_id": "q", "title": "Q", "kind": "single",
                               "responses": 3, "pending": 0, "facility": 1 / 3,
                               "discrimination": 2 / 3, "distribution": []}])
    assert "0.333,0.667" in csv and "0.3333" not in csv
