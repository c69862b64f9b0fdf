"""Check families a student sees the results of only after their deadline (per assignment).

An instructor may keep some checks' findings for after the deadline (Gradescope's "after due
date" tests): a student then reads, for each check of those families, its verdict and points
(they count at once, and the score adds up) but not its message or details, which would say
what the hidden inputs were and what was wrong. The bug-first summary is made again from the
checks the student may read, so it does not name what only a hidden check found.
Instructors always see everything. The deadline is the student's own (an extension moves it);
an assignment without a deadline keeps them hidden until the instructor clears the setting.
"""
from __future__ import annotations

import re
from datetime import datetime
from types import SimpleNamespace

from flask_babel import gettext

from grader.i18n import T, Texts, entry

from ..models import Submission, User, utcnow


def task_families(task_id: str) -> list[str]:
    """Every check family of the task, reported-only ones included, in its order."""
    from grader.tasks import TASKS
    return list(TASKS[task_id].points)


def parse(text: str, task_id: str) -> list[str] | None:
    """"grad stability" (spaces or commas between) to a list of families; empty: None.
    Raises ValueError naming a family the task does not have."""
    names = [n for n in re.split(r"[\s,;]+", (text or "").strip()) if n]
    if not names:
        return None
    known = task_families(task_id)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(gettext("%(names)s: not a check family of this task; its families are %(known)s",
                                 names=", ".join(unknown), known=" ".join(known)))
    return list(dict.fromkeys(names))


def hidden_for(submission: Submission, viewer: User, now: datetime | None = None) -> set[str]:
    """The families whose findings ``viewer`` may not read yet on ``submission``."""
    families = set(submission.assignment.hidden_families or [])
    if not families or viewer.is_instructor:
        return set()
    from sqlalchemy.orm import object_session

    from .extensions import limits_for
    session = object_session(submission)
    deadline = (limits_for(session, submission.user, submission.assignment).deadline
                if session is not None else submission.assignment.deadline)
    if deadline is not None and (now or utcnow()) > deadline:
        return set()
    return families


def hide(checks: list[dict], report: dict, families: set[str]) -> tuple[list[dict], str | None, object]:
    """``checks`` with the findings of ``families`` taken out, and the summary (English, and
    its stored template) made again from what is left."""
    from grader.causes import summary  # imports the checks (torch): only when something is hidden

    if not families:
        return checks, report.get("summary"), report.get("summary_i18n")
    hidden_ids = set()
    shown = []
    for c in checks:
        if c["id"].split(".")[0] in families:
            hidden_ids.add(c["id"])
            c = {key: value for key, value in c.items() if key != "message_i18n"}
            c.update(details={"hidden": True}, message=gettext(
                "your instructor shows what this check found after the deadline; its points count now"))
        shown.append(c)
    causes = []
    for cause in report.get("causes") or []:
        charged = [i for i in cause.get("charged") or [] if i not in hidden_ids]
        knock_on = [i for i in cause.get("knock_on") or [] if i not in hidden_ids]
        if charged or knock_on:  # a bug only a hidden check saw is not named yet
            causes.append({**cause, "charged": charged, "knock_on": knock_on,
                           "families": [f for f in cause.get("families") or [cause.get("family")]
                                        if f not in families] or [cause.get("family")]})
    visible = [SimpleNamespace(id=c["id"], passed=c["passed"], max_points=c["max_points"],
                               details=c.get("details") or {},
                               message=_restored(c.get("message_i18n")) or c["message"])
               for c in checks if c["id"] not in hidden_ids]
    said = summary(visible, causes)
    return shown, str(said), entry(said) if isinstance(said, T) else None


def _restored(stored):
    """A stored message entry back into a ``T`` (so the summary's "first check: …" stays in the
    reader's language); None for a plain string."""
    if isinstance(stored, dict) and "t" in stored:
        return T(stored["t"], **{k: _value(v) for k, v in (stored.get("a") or {}).items()})
    if isinstance(stored, dict) and "l" in stored:
        return Texts(stored["l"])
    return None


def _value(value):
    if isinstance(value, dict) and "float" in value:
        return float(value["float"])
    return _restored(value) or value

