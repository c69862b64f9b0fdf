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
