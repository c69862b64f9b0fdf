"""Which mistakes are common on a coding task: per check, and per named cause.

A failing check whose output matched the reference with a named bug applied carries that
bug's name (``details["diagnosis"]``, grader/causes.py and grader/checks/variants.py): such
failures are counted under the bug, said in the reader's language. Other failures are
grouped by their message with the numbers masked (shapes, errors and indices differ on every
run), and each group is shown by a real message of it, not by the masked template.

"Latest" is each student's newest graded submission (its newest result); "all runs" is every
graded submission's newest result. Counting is done by the database, which holds hundreds of
thousands of check rows in a course; only failing rows come back to Python.
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict

from sqlalchemy import and_, case, false, func, or_, select
from sqlalchemy.orm import Session

from ..models import Assignment, Result, StoredCheck, Submission

SKIPPED_PREFIX = "skipped:"
_CAUSE = re.compile(r"Likely cause: (.+?)\.?$", re.S)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e-?\d+)?")
SHOWN_GROUPS = 3  # per check, the most common


def mistake(message: str) -> str:
    """The grouping key of a failure without a named bug: the grader's "Likely cause: ..."
    when the message has one; otherwise the message with its numbers masked."""
    cause = _CAUSE.search(message)
    if cause:
        return cause.group(1).strip()[:200]
    return _NUMBER.sub("…", message).strip()[:200]


def bug_sentence(name: str, task_id: str | None = None):
    """A named bug's sentence in the task's own catalogue (a grader ``T``, rendered in the reader's
    language by the page); None for a name the grader does not know (a report from another grader
    version). A task the grader does not know explains attention's bugs only."""
    from grader.checks.variants import ATTENTION
    from grader.tasks import registry

    task = registry().get(task_id) if task_id else None
    return (task.bugs if task is not None else ATTENTION).explain(name) or None


def _selects(assignment: Assignment):
    done = and_(Submission.assignment_id == assignment.id, Submission.status == "done")
    # IN (subquery) rather than joins: both databases hash the subquery once.
    newest_results = (select(func.max(Result.id))
                      .join(Submission, Submission.id == Result.submission_id).where(done)
                      .group_by(Result.submission_id))
    newest_subs = select(func.max(Submission.id)).where(done).group_by(Submission.user_id)
    # A check skipped because the file did not load was not run: neither a failure nor a pass.
    ran = ~StoredCheck.message.like(SKIPPED_PREFIX + "%")

    def counted(*columns):
        return (select(*columns).join(Result, Result.id == StoredCheck.result_id)
                .where(StoredCheck.result_id.in_(newest_results), ran))
    return counted, Result.submission_id.in_(newest_subs)


def _group(diagnosis: str | None, message: str, task_id: str | None) -> tuple[str, str]:
    if diagnosis and bug_sentence(diagnosis, task_id):
        return ("bug", diagnosis)
    return ("message", mistake(message))


def check_failure_rates(session: Session, assignment: Assignment) -> list[dict]:
    """Per check: how many students' latest graded submission fails it, and over all runs;
    its most common mistakes (``common_mistakes``: [{"bug" | "example", "count"}]); and, of the
    students failing it now, how many with a named bug (``named_latest``). Scored checks
    first: a reported-only check is a hint, not a lost point."""
    counted, is_latest = _selects(assignment)
    failed = StoredCheck.passed.is_(False)
    rows = session.execute(counted(
        StoredCheck.check_id, func.count(), func.sum(case((failed, 1), else_=0)),
        func.sum(case((is_latest, 1), else_=0)),
        func.sum(case((and_(is_latest, failed), 1), else_=0)),
        func.min(StoredCheck.position), func.max(StoredCheck.max_points))
        .group_by(StoredCheck.check_id)).all()
    diagnosis = StoredCheck.details["diagnosis"].as_string()
    groups: dict[str, Counter] = defaultdict(Counter)
    examples: dict[tuple, Counter] = defaultdict(Counter)  # the exact messages of a group
    named_latest: Counter = Counter()
    for check_id, message, named, latest, n in session.execute(counted(
            StoredCheck.check_id, StoredCheck.message, diagnosis, is_latest, func.count())
            .where(failed, StoredCheck.message != "")
            .group_by(StoredCheck.check_id, StoredCheck.message, diagnosis, is_latest)):
        key = _group(named, message, assignment.task_id)
        groups[check_id][key] += n
        examples[(check_id, key)][message] += n
        if latest and key[0] == "bug":
            named_latest[check_id] += n
    out = []
    for check_id, total_all, failed_all, students, failed_latest, order, max_points in rows:
        common = [{"bug": bug_sentence(value, assignment.task_id) if kind == "bug" else None,
                   "example": examples[(check_id, (kind, value))].most_common(1)[0][0], "count": n}
                  for (kind, value), n in groups[check_id].most_common(SHOWN_GROUPS)]
        out.append({
            "check_id": check_id, "failed_latest": int(failed_latest or 0),
            "students": int(students or 0), "failed_all": int(failed_all or 0),
            "total_all": int(total_all), "order": order, "max_points": max_points,
            "scored": bool(max_points), "named_latest": min(named_latest[check_id], int(failed_latest or 0)),
            "latest_rate": (failed_latest or 0) / students if students else 0.0,
            "all_rate": (failed_all or 0) / total_all if total_all else 0.0,
            "common_mistakes": common})
    _example_templates(session, out)
    out.sort(key=lambda s: (not s["scored"], -s["latest_rate"], -s["all_rate"], s["order"], s["check_id"]))
    return out


def _example_templates(session: Session, rates: list[dict]) -> None:
    """Give each example message its stored template (``example_i18n``), so the page shows it in
    the reader's language (review 3, P5): the check rows keep the English text, the report the
    template. One query, one report per distinct example, whatever the course's size."""
    wanted = {(r["check_id"], m["example"]) for r in rates for m in r["common_mistakes"] if not m["bug"]}
    where = or_(*(and_(StoredCheck.check_id == c, StoredCheck.message == m) for c, m in wanted)) \
        if wanted else false()
    first = select(func.min(StoredCheck.id)).where(where).group_by(StoredCheck.check_id, StoredCheck.message)
    found = {}
    for check_id, message, position, report in session.execute(
            select(StoredCheck.check_id, StoredCheck.message, StoredCheck.position, Result.report)
            .join(Result, Result.id == StoredCheck.result_id).where(StoredCheck.id.in_(first))):
        checks = (report or {}).get("checks") or []
        if position < len(checks) and checks[position].get("id") == check_id:
            found[(check_id, message)] = checks[position].get("message_i18n")
    for r in rates:
        for m in r["common_mistakes"]:
            m["example_i18n"] = found.get((r["check_id"], m["example"]))


def common_bugs(session: Session, assignment: Assignment) -> dict:
    """The named bugs in the students' latest submissions: [{"bug", "students", "checks"}],
    most common first, and how many students fail a scored check that no named bug explains
    (``unexplained``) out of ``students`` with a graded submission."""
    counted, is_latest = _selects(assignment)
    failing = and_(is_latest, StoredCheck.passed.is_(False), StoredCheck.max_points > 0)
    diagnosis = StoredCheck.details["diagnosis"].as_string()
    students = session.scalar(select(func.count(func.distinct(Submission.user_id))).where(
        Submission.assignment_id == assignment.id, Submission.status == "done")) or 0
    by_bug: dict[str, set] = defaultdict(set)
    checks: dict[str, Counter] = defaultdict(Counter)
    unexplained: set = set()
    for user_id, check_id, named in session.execute(counted(
            Submission.user_id, StoredCheck.check_id, diagnosis)
            .join(Submission, Submission.id == Result.submission_id).where(failing)):
        if named and bug_sentence(named, assignment.task_id):
            by_bug[named].add(user_id)
            checks[named][check_id] += 1
        else:
            unexplained.add(user_id)
    bugs = [{"name": name, "bug": bug_sentence(name, assignment.task_id), "students": len(users),
             "checks": [c for c, _ in checks[name].most_common()]}
            for name, users in sorted(by_bug.items(), key=lambda item: (-len(item[1]), item[0]))]
    return {"bugs": bugs, "unexplained": len(unexplained), "students": students}
