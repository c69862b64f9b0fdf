"""Instructor page: one student, all their work (standing per assignment, every submission
and quiz attempt, their extensions). Reached from the student's name on the score matrix
and on an assignment's lists."""
from __future__ import annotations

from flask import Blueprint, abort, render_template
from sqlalchemy import select
from sqlalchemy.orm import selectinload

from ..models import Extension, QuizAttempt, Submission, User
from ..services import progress
from .helpers import db, instructor_required

bp = Blueprint("roster", __name__, url_prefix="/instructor/students")


@bp.get("/<int:user_id>")
@instructor_required
def student(user_id: int):
    session = db()
    person = session.get(User, user_id)
    if person is None:
        abort(404)
    submissions = session.scalars(
        select(Submission).where(Submission.user_id == person.id)
        .options(selectinload(Submission.assignment)).order_by(Submission.id.desc())).all()
    attempts = session.scalars(
        select(QuizAttempt).where(QuizAttempt.user_id == person.id)
        .options(selectinload(QuizAttempt.assignment)).order_by(QuizAttempt.id.desc())).all()
    extensions = session.scalars(
        select(Extension).where(Extension.user_id == person.id)
        .options(selectinload(Extension.assignment))).all()
    # each submission's number among that student's attempts at its assignment, as they see it
    numbers: dict[int, int] = {}
    seen: dict[int, int] = {}
    for sub in sorted(submissions, key=lambda s: s.id):
        seen[sub.assignment_id] = numbers[sub.id] = seen.get(sub.assignment_id, 0) + 1
    quiz_numbers: dict[int, int] = {}  # the same for quiz attempts: "Attempt 1", not "#2"
    for attempt in sorted(attempts, key=lambda a: a.id):
        seen[-attempt.assignment_id] = quiz_numbers[attempt.id] = seen.get(-attempt.assignment_id, 0) + 1
    return render_template("instructor/student.html", person=person, quiz_numbers=quiz_numbers,
                           standings=progress.home_rows(session, person), submissions=submissions,
                           numbers=numbers, attempts=attempts, extensions=extensions)
