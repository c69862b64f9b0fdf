"""Quiz answers as a student meets them: an ordering question starts empty, points are
rounded for people, and unsent answers survive another question's "Check answer"."""
from __future__ import annotations

from pathlib import Path

from werkzeug.datastructures import MultiDict

from pages_support import env  # noqa: F401

ORDERING = {"kind": "ordering", "id": "steps", "items": [
    {"id": "a", "text": "scores"}, {"id": "b", "text": "softmax"}, {"id": "c", "text": "`@ V`"}]}


def _form(env, data=None):
    from web.pages.forms import answer_form
    posted = MultiDict({f"q-steps-{k}": v for k, v in (data or {}).items()})
    with env.app.test_request_context(method="POST", data=posted):
        form = answer_form(ORDERING)
        return form, form.validate()


def test_an_ordering_question_starts_with_no_position_filled(env):
    from web.pages.forms import answer_form
    with env.app.test_request_context():
        form = answer_form(ORDERING)
        assert [form[f"pos{i}"].data for i in range(3)] == ["", "", ""]
        assert "— choose —" in str(form["pos0"])
    form, ok = _form(env, {"pos0": "a", "pos1": "", "pos2": "c"})
    assert not ok and form.errors["pos1"] == ["choose the item for position 2"]
    form, ok = _form(env, {"pos0": "a", "pos1": "a", "pos2": "c"})
    assert not ok and form.errors["pos2"] == ["put each item in exactly one position"]
    assert _form(env, {"pos0": "c", "pos1": "a", "pos2": "b"})[1]


def test_points_are_rounded_for_people():
    from web.pages.helpers import format_points, format_score
    from web.services.gradebook import _number
    assert format_score(1 / 3, 2.0) == "0.33 / 2"
    assert [format_points(v) for v in (6.733333, 100.0, 38, None)] == ["6.73", "100", "38", "—"]
    assert _number(9.733333) == 9.73 and _number(6.0) == 6


def test_the_quiz_page_keeps_unsent_answers_in_the_tab():
    script = (Path(__file__).resolve().parent.parent / "web/static/js/quiz-drafts.js").read_text()
    template = (Path(__file__).resolve().parent.parent / "web/templates/quiz/quiz.html").read_text()
    # drafts are restored before editor.js makes editors of the text areas
    assert template.index("js/quiz-drafts.js") < template.index("js/editor.js")
    assert 'class="answer-form" data-question=' in template and "sessionStorage" in script


def test_a_failing_code_answer_shows_its_inputs_the_expected_values_and_what_it_returned(env):
    """Like the task's result page: the failing call's input shapes, the reference's values
    and the student's, a rounded corner of each, computed by the grading worker's parent."""
    import re

    import torch

    from pages_support import db_session, grade_queued, sign_in
    from questions.model import load_bank
    from questions.references import scaled_scores
    from questions.variants import code_cases
    from web.models import Assignment, QuizAnswer

    qid = "scaled-scores-code"
    with db_session(env) as session:
        quiz = session.query(Assignment).filter_by(slug="quiz").one()
        quiz.question_ids = [qid]
        session.commit()
    client = env.app.test_client()
    sign_in(client, "ada@example.org")
    client.post("/quiz/quiz/start")
    unscaled = "def scaled_scores(q, k):\n    return q @ k.transpose(-2, -1)\n"  # no 1/sqrt(d_k)
    client.post(f"/quiz/quiz/questions/{qid}", data={f"q-{qid}-code": unscaled})
    assert grade_queued(env) == 1  # the grading worker runs the real code check
    page = client.get("/quiz/quiz").get_data(as_text=True)
    box = page[page.index(f'id="failure-{qid}"'):]

    with db_session(env) as session:
        seed = session.query(QuizAnswer).filter_by(question_id=qid).one().seed
    q, k = code_cases(load_bank().get(qid), seed)[0]  # the first case already fails
    want, got = scaled_scores(q, k), q @ k.transpose(-2, -1)
    assert "3×4, 5×4" in box  # the input shapes
    tables = re.findall(r'<figure class="tensor-view (expected|got)">(.*?)</figure>', box, re.S)
    assert [name for name, _ in tables] == ["expected", "got"]
    for (name, html), tensor in zip(tables, (want, got)):
        cells = [float(c) for c in re.findall(r"<td>([^<]+)</td>", html)]
        corner = torch.round(tensor[:4, :6].double(), decimals=4).flatten().tolist()
        assert cells == corner, name
        assert "float32 3×5" in html  # the whole 3×5: no slice named
    assert want[0, 0] != got[0, 0]  # the two tables differ where the scale is missing


def test_the_preview_names_the_corner_it_shows_and_writes_infinities_as_text():
    import json

    import torch

    from questions.codecheck import preview
    big = preview(torch.arange(2 * 3 * 7 * 9, dtype=torch.float32).reshape(2, 3, 7, 9) / 3)
    assert big["index"] == "[0, 0, :4, :6]" and big["shape"] == [2, 3, 7, 9]
    assert len(big["rows"]) == 4 and all(len(r) == 6 for r in big["rows"])
    assert big["rows"][0][1] == 0.3333  # rounded to 4 decimals
    masked = preview(torch.tensor([[0.5, float("-inf")]]))
    assert masked["index"] == "" and masked["rows"] == [[0.5, "-inf"]]
    json.dumps(masked, allow_nan=False)  # storable in PostgreSQL's JSON
    assert preview(None) == {"type": "NoneType"}
    assert "rows" not in preview(torch.ones(2, 2, dtype=torch.complex64))  # JSON has no complex
