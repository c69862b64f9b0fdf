"""Score exports in the column layouts that LMS gradebooks import.

- ``plain``: one row per student and assignment (``scores.scores_csv``).
- ``canvas``: Canvas's gradebook CSV: ``Student`` ("Last, First"), ``ID, SIS User ID, SIS Login ID, Section``,
  then one column per assignment, and a ``Points Possible`` row. Canvas matches students by
  SIS Login ID (the email here) when ID is empty, and creates an assignment for each new
  column on import.
- ``moodle``: one row per student with ``Email address`` as the identifier Moodle's
  "Import grades from CSV" maps to a user, then one column per assignment.
"""
from __future__ import annotations

from sqlalchemy.orm import Session

from ..models import Course
from .csv_export import csv_text
from .scores import scores_csv, scores_table

LAYOUTS = ("plain", "canvas", "moodle")


def _pivot(session: Session, course: Course):
    assignments = list(course.assignments)
    students: dict[int, dict] = {}
    for row in scores_table(session, course):
        student = students.setdefault(row["user_id"], {"email": row["email"], "name": row["name"],
                                                       "scores": {}, "max": {}})
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


def sortable_name(name: str) -> str:
    """Canvas's ``Student`` column: "Last, First" ("Ada Lovelace" -> "Lovelace, Ada")."""
    parts = name.strip().rsplit(" ", 1)
    return f"{parts[1]}, {parts[0]}" if len(parts) == 2 and parts[0] else name.strip()


def export_csv(session: Session, course: Course, layout: str = "plain") -> str:
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}: use one of {', '.join(LAYOUTS)}")
    if layout == "plain":
        return scores_csv(scores_table(session, course))
    assignments, students = _pivot(session, course)
    titles = [f"{a.title} ({a.slug})" for a in assignments]
    if layout == "canvas":
        tops = []
        for a in assignments:
            known = [s["max"][a.slug] for s in students if s["max"].get(a.slug) is not None]
            tops.append(_number(max(known)) if known else "")
        rows = [["    Points Possible", "", "", "", "", *tops]]
        rows += [[sortable_name(s["name"]), "", "", s["email"], course.title,
                  *(_number(s["scores"].get(a.slug)) for a in assignments)] for s in students]
        return csv_text(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *titles], rows)
    return csv_text(["Email address", "Full name", *titles],
                    ([s["email"], s["name"], *(_number(s["scores"].get(a.slug)) for a in assignments)]
                     for s in students))
