"""What the instructor pages count: score matrix, item statistics, job timings (a coding
task's common mistakes: ``mistakes``).

All functions read the database and return plain dicts/lists; the pages draw them.
Item statistics follow classical test theory: *facility* is the mean fraction of the
points students got; the *discrimination index* is the facility among the top 27 % of
students (by the total of the attempt counted) minus that among the bottom 27 %. Both read
each student's FIRST answer: the first try at each question in their first submitted
attempt. Later tries and retakes come after the feedback (and, once a question is final,
the worked solution), so counting them would make every question look easy.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime, timedelta
from types import SimpleNamespace

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session, selectinload

from ..models import (Assignment, Course, Extension, GradingJob, QuizAnswer, QuizAttempt, QuizTry,
                      Submission, utcnow)
from .csv_export import csv_text
from .scores import scores_table

GROUP_SHARE = 0.27  # Kelley's upper/lower groups


# ---- course overview ---------------------------------------------------------------------

def score_matrix(session: Session, course: Course, query: str = "", sort: str = "name",
                 descending: bool = False, now: datetime | None = None
                 ) -> tuple[list[Assignment], list[dict]]:
    """Students × assignments: one row per student with a cell per assignment slug.

    ``total`` is the student's average percentage over the assignments that count for them
    (``counted``), each weighted equally: raw points would weigh a 100-point task against a
    16-point quiz. An assignment counts once the student has a score on it, or once its
    deadline (theirs, with an extension) has passed, unstarted work then counting as 0; work
    not started and not yet due, or without a deadline, is left out (``total`` is None when
    nothing counts yet).
    """
    now = now or utcnow()
    assignments = list(course.assignments)
    deadlines = {(e.user_id, e.assignment_id): e.deadline for e in session.scalars(
        select(Extension).where(Extension.assignment_id.in_([a.id for a in assignments]),
                                Extension.deadline.is_not(None)))}
    by_slug = {a.slug: a for a in assignments}
    students: dict[int, dict] = {}
    for row in scores_table(session, course):
        student = students.setdefault(row["user_id"], {
            "user_id": row["user_id"], "email": row["email"], "name": row["name"],
            "cells": {}, "total": None, "counted": 0, "_sum": 0.0})
        student["cells"][row["assignment"]] = row
        item = by_slug[row["assignment"]]
        deadline = deadlines.get((row["user_id"], item.id), item.deadline)
        if row["best_score"] is not None and row["max_score"]:
            student["_sum"] += 100.0 * row["best_score"] / row["max_score"]
        elif row["best_score"] is None and not (deadline is not None and deadline < now):
            continue  # not started, and not due (or no deadline): not a 0 yet
        student["counted"] += 1
    for student in students.values():
        total = student.pop("_sum")
        student["total"] = total / student["counted"] if student["counted"] else None
    rows = list(students.values())
    needle = query.strip().lower()
    if needle:
        rows = [r for r in rows if needle in r["email"].lower() or needle in r["name"].lower()]
    slugs = {a.slug for a in assignments}
    if sort in slugs:  # students without a score stay at the bottom in either direction
        scored = [r for r in rows if r["cells"][sort]["best_score"] is not None]
        blank = [r for r in rows if r["cells"][sort]["best_score"] is None]
        scored.sort(key=lambda r: (r["cells"][sort]["best_score"], r["email"]), reverse=descending)
        rows = scored + sorted(blank, key=lambda r: r["email"])
    elif sort == "total":  # students with nothing counted yet stay at the bottom
        rows = sorted((r for r in rows if r["total"] is not None),
                      key=lambda r: (r["total"], r["email"]), reverse=descending) + \
            sorted((r for r in rows if r["total"] is None), key=lambda r: r["email"])
    else:
        field = sort if sort in ("name", "email") else "name"
        rows.sort(key=lambda r: (r[field].lower(), r["email"]), reverse=descending)
    return assignments, rows


def best_scores(session: Session, assignment: Assignment) -> tuple[list[float], float | None]:
    """Each student's best score on ``assignment`` and the maximum possible."""
    if assignment.kind == "quiz":
        rows = session.execute(
            select(func.max(QuizAttempt.score), func.max(QuizAttempt.max_score))
            .where(QuizAttempt.assignment_id == assignment.id, QuizAttempt.status == "submitted")
            .group_by(QuizAttempt.user_id)).all()
    else:
        rows = session.execute(
            select(func.max(Submission.score), func.max(Submission.max_score))
            .where(Submission.assignment_id == assignment.id, Submission.score.is_not(None))
            .group_by(Submission.user_id)).all()
    scores = [float(r[0]) for r in rows if r[0] is not None]
    top = max((float(r[1]) for r in rows if r[1] is not None), default=None)
    return scores, top


# ---- coding tasks ------------------------------------------------------------------------

def submission_rows(session: Session, assignment: Assignment, limit: int = 200) -> list[dict]:
    """The newest submissions with their status and timings."""
    subs = session.scalars(
        select(Submission).where(Submission.assignment_id == assignment.id)
        .options(selectinload(Submission.job), selectinload(Submission.user))
        .order_by(Submission.id.desc()).limit(limit)).all()
    rows = []
    for sub in subs:
        job = sub.job
        rows.append({"submission": sub, "user": sub.user, "job": job,
                     "wait": _seconds(job.queued_at, job.started_at) if job else None,
                     "grading": _seconds(job.started_at, job.finished_at) if job else None})
    return rows


# ---- quizzes -----------------------------------------------------------------------------

def attempt_rows(session: Session, assignment: Assignment, limit: int = 200) -> list[QuizAttempt]:
    """The newest quiz attempts, with their students loaded."""
    return list(session.scalars(
        select(QuizAttempt).where(QuizAttempt.assignment_id == assignment.id)
        .options(selectinload(QuizAttempt.user))
        .order_by(QuizAttempt.id.desc()).limit(limit)))


def first_answer(row: QuizAnswer, first_try: QuizTry | None):
    """What a student answered first to this question: its first try with an automatic
    verdict, else the answer row itself (free text, whose grade is the instructor's)."""
    if first_try is None:
        return row
    return SimpleNamespace(answer=first_try.answer, seed=row.seed,
                           answered_at=first_try.created_at, correct=first_try.correct,
                           points=first_try.points,
                           max_points=first_try.max_points or row.max_points)


def question_stats(session: Session, assignment: Assignment, bank=None) -> list[dict]:
    """Per question: responses, facility, discrimination and the answer distribution,
    all from each student's first answers (see the module docstring)."""
    submitted = session.scalars(
        select(QuizAttempt).where(QuizAttempt.assignment_id == assignment.id,
                                  QuizAttempt.status == "submitted")
        .options(selectinload(QuizAttempt.answers))
        .order_by(QuizAttempt.id)).all()
    first_tries: dict[int, QuizTry] = {}  # one query, whatever the course's size
    for tried in session.scalars(
            select(QuizTry).join(QuizAnswer, QuizAnswer.id == QuizTry.quiz_answer_id)
            .join(QuizAttempt, QuizAttempt.id == QuizAnswer.attempt_id)
            .where(QuizAttempt.assignment_id == assignment.id, QuizAttempt.status == "submitted",
                   QuizTry.status == "graded", QuizTry.correct.is_not(None))
            .order_by(QuizTry.quiz_answer_id, QuizTry.number)):
        first_tries.setdefault(tried.quiz_answer_id, tried)
    firsts: dict[int, QuizAttempt] = {}
    for attempt in submitted:
        firsts.setdefault(attempt.user_id, attempt)  # the lowest id: the earliest
    attempts = list(firsts.values())
    ranked = sorted(attempts, key=lambda a: (a.score or 0.0) / (a.max_score or 1.0))
    size = max(1, round(GROUP_SHARE * len(ranked))) if len(ranked) >= 2 else 0
    lower = {a.id for a in ranked[:size]}
    upper = {a.id for a in ranked[-size:]} if size else set()

    by_question: dict[str, list] = defaultdict(list)
    for attempt in attempts:
        for answer in attempt.answers:
            by_question[answer.question_id].append(
                (attempt.id, first_answer(answer, first_tries.get(answer.id))))
    out = []
    for position, qid in enumerate(assignment.question_ids or []):
        rows = by_question.get(qid, [])
        question = bank.questions.get(qid) if bank is not None else None
        fractions = {aid: (a.points / a.max_points if a.max_points else 0.0) for aid, a in rows}
        pending = sum(1 for _, a in rows if a.answered_at is not None and a.correct is None)
        facility = float(np.mean(list(fractions.values()))) if fractions else None
        discrimination = None
        if size and len(ranked) >= 4:
            up = [fractions[a] for a in upper if a in fractions]
            low = [fractions[a] for a in lower if a in fractions]
            if up and low:
                discrimination = float(np.mean(up) - np.mean(low))
        out.append({
            "question_id": qid, "position": position + 1,
            "title": question.text("title", "en") if question else qid,
            "kind": question.kind if question else "?",
            "responses": sum(1 for _, a in rows if a.answered_at is not None),
            "attempts": len(rows), "pending": pending, "facility": facility,
            "discrimination": discrimination,
            "distribution": answer_distribution(question, [a for _, a in rows]),
        })
    return out


QUESTION_STATS_COLUMNS = ("position", "question_id", "title", "kind", "responses", "pending",
                          "facility", "discrimination", "answers")


def question_stats_csv(stats: list[dict]) -> str:
    """``question_stats`` as CSV; the answer distribution (students' own text) in one cell."""
    def answers(q):
        return "; ".join(f"{'✓ ' if d['correct'] else ''}{d['label']}: {d['count']}"
                         for d in q["distribution"])
    return csv_text(QUESTION_STATS_COLUMNS, (
        [q["position"], q["question_id"], q["title"], q["kind"], q["responses"], q["pending"],
         _share(q["facility"]), _share(q["discrimination"]), answers(q)] for q in stats))


def _share(value: float | None) -> float | None:
    """A facility or discrimination for the CSV: 0.333, not 0.3333333333333333 (Q5)."""
    return None if value is None else round(value, 3)


def _readable(text: str) -> str:
    """An option's text over every variant: ``{a}`` (a value that differs per student) written
    as the parameter's name, as the question's own wording would name it ("positions a and b")."""
    from questions.schema import PLACEHOLDER_RE
    return PLACEHOLDER_RE.sub(lambda m: m.group(1), text)


def answer_distribution(question, answers: list) -> list[dict]:
    """[{label, count, correct}]: options chosen (choice questions), values (numeric) or outcomes."""
    if question is not None and question.kind in ("single", "multiple"):
        from questions.variants import token

        counts = Counter()
        for a in answers:
            chosen = a.answer if isinstance(a.answer, list) else [a.answer] if a.answer else []
            for option in question.data["options"]:
                if option["id"] in chosen or token(a.seed, question.id, option["id"]) in chosen:
                    counts[option["id"]] += 1
        return [{"label": _readable(option["text"]["en"]), "count": counts[option["id"]],
                 "correct": bool(option.get("correct"))} for option in question.data["options"]]
    if question is not None and question.kind == "numeric":
        counts = Counter((str(a.answer), a.correct) for a in answers if a.answered_at is not None)
        return [{"label": value, "count": n, "correct": bool(correct)}
                for (value, correct), n in counts.most_common(6)]
    outcome = Counter()
    for a in answers:
        if a.answered_at is None:
            outcome["blank"] += 1
        elif a.correct is None:
            outcome["awaiting review"] += 1
        elif a.correct:
            outcome["correct"] += 1
        elif a.points > 0:
            outcome["partly right"] += 1
        else:
            outcome["wrong"] += 1
    return [{"label": label, "count": outcome[label], "correct": label == "correct"}
            for label in ("correct", "partly right", "wrong", "awaiting review", "blank")
            if outcome[label]]


# ---- job monitor -------------------------------------------------------------------------

def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    return (end - start).total_seconds() if start and end else None


def _percentiles(values: list[float]) -> dict:
    if not values:
        return {"n": 0, "p50": None, "p95": None, "max": None}
    arr = np.asarray(values, dtype=float)
    return {"n": len(values), "p50": float(np.percentile(arr, 50)),
            "p95": float(np.percentile(arr, 95)), "max": float(arr.max())}


def _job_loads():
    """What the job monitor shows of each job: its submission's or quiz answer's student."""
    return (selectinload(GradingJob.submission).selectinload(Submission.user),
            selectinload(GradingJob.quiz_try).selectinload(QuizTry.quiz_answer)
            .selectinload(QuizAnswer.attempt).selectinload(QuizAttempt.user))


def job_stats(session: Session, now: datetime | None = None, hours: float = 24.0,
              listed: int = 50) -> dict:
    """Counts by status, open and failed jobs, wait/grading percentiles, workers seen."""
    now = now or utcnow()
    since = now - timedelta(hours=hours)
    counts = dict(session.execute(
        select(GradingJob.status, func.count()).group_by(GradingJob.status)).all())
    open_jobs = session.scalars(
        select(GradingJob).where(GradingJob.status.in_(("queued", "running")))
        .options(*_job_loads())
        .order_by(GradingJob.id).limit(listed)).all()
    failed = session.scalars(
        select(GradingJob).where(GradingJob.status == "failed")
        .options(*_job_loads())
        .order_by(GradingJob.id.desc()).limit(listed)).all()
    finished = session.execute(
        select(GradingJob.queued_at, GradingJob.started_at, GradingJob.finished_at)
        .where(GradingJob.status == "done", GradingJob.finished_at >= since)).all()
    waits = [w for w in (_seconds(r.queued_at, r.started_at) for r in finished) if w is not None]
    grading = [g for g in (_seconds(r.started_at, r.finished_at) for r in finished) if g is not None]
    workers = [{"name": name, "jobs": n, "last_seen": last} for name, n, last in session.execute(
        select(GradingJob.worker, func.count(), func.max(GradingJob.started_at))
        .where(GradingJob.worker.is_not(None))
        .group_by(GradingJob.worker).order_by(func.max(GradingJob.started_at).desc())).all()]
    oldest = min((j.queued_at for j in open_jobs if j.status == "queued"), default=None)
    return {
        "counts": {s: counts.get(s, 0) for s in ("queued", "running", "done", "failed")},
        "open": open_jobs, "failed": failed, "hours": hours,
        "wait": _percentiles(waits), "grading": _percentiles(grading),
        "workers": workers, "oldest_queued_seconds": _seconds(oldest, now),
        "now": now,
    }
