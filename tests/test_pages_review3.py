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
