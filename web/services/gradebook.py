"""Score exports in the column layouts that LMS gradebooks import.

- ``plain``: one row per student and assignment (``scores.scores_csv``).
- ``canvas``: Canvas's gradebook CSV (the layout its export writes and its import reads):
  ``Student`` ("Last, First"), ``ID`` (Canvas's user id), ``SIS User ID``, ``SIS Login ID``,
  ``Section``, then one column per assignment, and a ``Points Possible`` row first. Canvas
  matches a row by ID, else SIS User ID, else SIS Login ID, so each is filled when an LTI
  launch or roster sync told us (``web.lti.identity``); without LTI, SIS Login ID is the
  e-mail. A column named ``Title (123)`` updates Canvas assignment 123 (an assignment placed
  in Canvas through LTI, whose launch sent ``$Canvas.assignment.id``); any other column
  creates a new assignment on import, named by the column: the assignment's title alone
  (Canvas would read a trailing "(sdpa)" as an assignment id that does not exist).
- ``moodle``: one row per student with ``Email address`` as the identifier Moodle's
  "Import grades from CSV" maps to a user, then one column per assignment, named by its title.

Two assignments with one title get their slugs after a dash, so that no two columns share a name.
"""
from __future__ import annotations

from sqlalchemy.orm import Session

from ..models import Course
from .courses import points_possible
from .csv_export import csv_text
from .scores import scores_csv, scores_table

LAYOUTS = ("plain", "canvas", "moodle")


def _pivot(session: Session, course: Course):
    assignments = list(course.assignments)
    students: dict[int, dict] = {}
    for row in scores_table(session, course):
        student = students.setdefault(row["user_id"], {"user_id": row["user_id"], "email": row["email"],
                                                       "name": row["name"], "scores": {}, "max": {}})
        # A quiz score still awaiting the instructor's review is not a grade yet: LMS layouts
        # leave its cell empty rather than import a provisional number as final.
        student["scores"][row["assignment"]] = None if row["awaiting_review"] else row["best_score"]
        student["max"][row["assignment"]] = row["max_score"]
    return assignments, list(students.values())


def _number(value):
    """A score as the gradebooks read it: 6 rather than 6.0, 9.73 rather than 9.733333; a
    number, never a formula."""
    if value is None:
        return ""
    value = round(float(value), 2)
    return int(value) if value.is_integer() else value


def sortable_name(name: str, given: str | None = None, family: str | None = None) -> str:
    """Canvas's ``Student`` column: "Last, First". From the LMS's name parts when it sent
    them, else from the account's one name field, as Canvas splits a name it is given: the
    last word is the family name ("Ada King Lovelace" -> "Lovelace, Ada King"); a name of one
    word (as many Chinese names are typed, "张伟") stays as it is."""
    if family and given:
        return f"{family.strip()}, {given.strip()}"
    parts = name.strip().rsplit(" ", 1)
    return f"{parts[1]}, {parts[0]}" if len(parts) == 2 and parts[0] else name.strip()


def _column_titles(assignments) -> list[str]:
    """Each assignment's column name: its title, with its slug where another has the same title."""
    seen: dict[str, int] = {}
    for a in assignments:
        seen[a.title.strip()] = seen.get(a.title.strip(), 0) + 1
    return [a.title.strip() if seen[a.title.strip()] == 1 else f"{a.title.strip()} – {a.slug}"
            for a in assignments]


def _canvas_csv(session: Session, course: Course, assignments, students) -> str:
    from ..lti.identity import PLACEHOLDER_DOMAIN, LmsPerson, assignment_ids, people  # late: LTI tables

    who, lms_ids = people(session, course), assignment_ids(session, course)
    titles = [f"{title} ({lms_ids[a.id]})" if a.id in lms_ids else title
              for a, title in zip(assignments, _column_titles(assignments))]
    tops = []
    for a in assignments:
        known = [s["max"][a.slug] for s in students if s["max"].get(a.slug) is not None]
        tops.append(_number(max(known) if known else points_possible(a)))
    rows = [["    Points Possible", "", "", "", "", *tops]]  # as Canvas's own export writes it
    for s in students:
        lms = who.get(s["user_id"]) or LmsPerson()
        # an LTI account's stand-in address is no login anywhere
        email = "" if s["email"].endswith("@" + PLACEHOLDER_DOMAIN) else s["email"]
        rows.append([sortable_name(s["name"], lms.given_name, lms.family_name),
                     lms.lms_user_id or "", lms.sis_user_id or "", lms.login_id or email,
                     lms.section or "", *(_number(s["scores"].get(a.slug)) for a in assignments)])
    return csv_text(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *titles], rows)


def export_csv(session: Session, course: Course, layout: str = "plain") -> str:
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}: use one of {', '.join(LAYOUTS)}")
    if layout == "plain":
        return scores_csv(scores_table(session, course))
    assignments, students = _pivot(session, course)
    if layout == "canvas":
        return _canvas_csv(session, course, assignments, students)
    return csv_text(["Email address", "Full name", *_column_titles(assignments)],
                    ([s["email"], s["name"], *(_number(s["scores"].get(a.slug)) for a in assignments)]
                     for s in students))
