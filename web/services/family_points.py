"""Points per check family, set by the instructor per assignment: the grader's verdicts, reweighted.

The grader's report gives each check its points out of its family's share of 100 (the task's own
split, ``grader/tasks``). An assignment may give the families other points ("output=30 scale=10"):
each family then earns its points times the share of its own points the grader awarded, so the
verdicts (and the one-bug-charged-once rule) stay the grader's and only the weights change.
"""
from __future__ import annotations

import re


def task_families(task_id: str) -> dict[str, int]:
    """The task's own points per family (reported-only families, worth 0, left out)."""
    from grader.tasks import TASKS
    return {family: points for family, points in TASKS[task_id].points.items() if points > 0}


def parse(text: str, task_id: str) -> dict[str, float] | None:
    """"output=30 scale=10 …" (spaces or commas between) to {family: points}; empty text: None
    (the task's own split). Raises ValueError naming what is wrong."""
    text = (text or "").strip()
    if not text:
        return None
    known = task_families(task_id)
    points: dict[str, float] = {}
    for item in re.split(r"[\s,;]+", text):
        family, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"{item!r}: write family=points, e.g. output=20")
        if family not in known:
            raise ValueError(f"{family!r} is not a scored check family of this task; the families are "
                             f"{', '.join(known)}")
        try:
            points[family] = float(value)
        except ValueError:
            raise ValueError(f"{item!r}: the points must be a number") from None
        if not 0 <= points[family] <= 1000:
            raise ValueError(f"{item!r}: points must be between 0 and 1000")
    missing = [f for f in known if f not in points]
    if missing:
        raise ValueError(f"give every family its points (missing: {', '.join(missing)}); "
                         f"the task's own split is {format_points(known)}")
    if sum(points.values()) <= 0:
        raise ValueError("the points must add up to more than 0")
    return points


def format_points(points: dict | None) -> str:
    return " ".join(f"{family}={value:g}" for family, value in (points or {}).items())


def reweighted(report: dict, family_points: dict[str, float]) -> tuple[float, float]:
    """(score, max score) of a grader report under the assignment's points per family."""
    earned: dict[str, float] = {}
    top: dict[str, float] = {}
    for check in report.get("checks") or []:
        family = str(check.get("id", "")).split(".")[0]
        earned[family] = earned.get(family, 0.0) + float(check.get("points") or 0.0)
        top[family] = top.get(family, 0.0) + float(check.get("max_points") or 0.0)
    score = sum(value * earned.get(family, 0.0) / top[family]
                for family, value in family_points.items() if top.get(family))
    return round(score, 6), float(sum(family_points.values()))
