"""The instructor's score table: per student and assignment, best score and attempts."""
from __future__ import annotations

from sqlalchemy import case, func, literal, select
from sqlalchemy.orm import Session

from ..models import Course, Enrollment, QuizAttempt, Submission, User
from .csv_export import csv_text
from .submissions import iso

# final: false while a quiz answer of the student awaits the instructor's review
COLUMNS = ("email", "name", "assignment", "kind", "best_score", "max_score", "attempts",
           "last_submitted_at", "final")


def scores_table(session: Session, course: Course) -> list[dict]:
    """One row per enrolled student and assignment (also those not attempted yet)."""
    students = session.scalars(
        select(User).join(Enrollment, Enrollment.user_id == User.id)
        .where(Enrollment.course_id == course.id, User.role == "student")
        .order_by(User.email)).all()
    assignments = list(course.assignments)
    ids = [a.id for a in assignments]

    code = {(r.user_id, r.assignment_id): r for r in session.execute(
        select(Submission.user_id, Submission.assignment_id,
               func.max(Submission.score).label("best"),
               func.max(Submission.max_score).label("max_score"),
               func.count(Submission.id).label("attempts"),
               func.max(Submission.created_at).label("last"),
               func.max(Submission.id).label("latest_id"),
               literal(0).label("awaiting"))
        .where(Submission.assignment_id.in_(ids))
        .group_by(Submission.user_id, Submission.assignment_id))}
    quiz = {(r.user_id, r.assignment_id): r for r in session.execute(
        select(QuizAttempt.user_id, QuizAttempt.assignment_id,
               func.max(QuizAttempt.score).label("best"),
               func.max(QuizAttempt.max_score).label("max_score"),
               func.count(QuizAttempt.id).label("attempts"),
               func.max(QuizAttempt.submitted_at).label("last"),
               func.max(QuizAttempt.id).label("latest_id"),
               func.sum(case((QuizAttempt.needs_manual.is_(True), 1), else_=0)).label("awaiting"))
        .where(QuizAttempt.assignment_id.in_(ids), QuizAttempt.status == "submitted")
        .group_by(QuizAttempt.user_id, QuizAttempt.assignment_id))}

    rows = []
    for student in students:
        for assignment in assignments:
            source = quiz if assignment.kind == "quiz" else code
            agg = source.get((student.id, assignment.id))
            rows.append({
                "user_id": student.id, "email": student.email, "name": student.name,
                "assignment": assignment.slug, "kind": assignment.kind,
                "best_score": agg.best if agg else None,
                "max_score": agg.max_score if agg else None,
                "attempts": agg.attempts if agg else 0,
                "last_submitted_at": iso(agg.last) if agg else None,
                # where the instructor reads the work, and whether a score still moves
                "latest_id": agg.latest_id if agg else None,
                "awaiting_review": bool(agg.awaiting) if agg else False,
                "final": not (agg and agg.awaiting),
            })
    return rows


def _rounded(key: str, value):
    # 9.73, not 9.733333 (a quiz question worth 1/3 of a point per item)
    return round(value, 2) if key in ("best_score", "max_score") and isinstance(value, float) \
        else value


def scores_csv(rows: list[dict]) -> str:
    return csv_text(COLUMNS, ([_rounded(k, row.get(k)) for k in COLUMNS] for row in rows))
