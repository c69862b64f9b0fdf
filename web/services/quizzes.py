"""Quiz attempts: each student gets their own variant of every question, graded on answer.

The question bank (``questions``) renders and grades; this module stores what was shown
(the variant seed), what was answered and the points, and lets instructors grade answers the
bank leaves to a person (``correct is None``) or override a grade.
"""
from __future__ import annotations

import functools

from sqlalchemy import func, select
from sqlalchemy.orm import Session, joinedload

from ..models import Assignment, ManualGrade, QuizAnswer, QuizAttempt, Submission, User, utcnow
from .submissions import SubmissionRejected, iso


class QuizError(ValueError):
    """An answer or attempt that is not accepted; the message is for the student."""


@functools.lru_cache(maxsize=1)
def _bank():
    from questions.model import load_bank

    return load_bank()


def _question(question_id: str):
    return _bank().get(question_id)


def student_key(user: User) -> str:
    """What a student's variants are derived from: stable for the account's lifetime."""
    return f"user:{user.id}"


def open_attempt(session: Session, user: User, assignment: Assignment) -> QuizAttempt | None:
    return session.scalar(select(QuizAttempt).where(
        QuizAttempt.user_id == user.id, QuizAttempt.assignment_id == assignment.id,
        QuizAttempt.status == "open"))


def start_attempt(session: Session, user: User, assignment: Assignment,
                  lang: str = "en", now=None) -> QuizAttempt:
    """The student's open attempt, or a new one (subject to deadline and attempt limits)."""
    from questions.variants import variant_seed

    if assignment.kind != "quiz":
        raise QuizError(f"{assignment.slug} is not a quiz")
    existing = open_attempt(session, user, assignment)
    if existing is not None:
        return existing
    now = now or utcnow()
    if not user.is_instructor:
        late = assignment.deadline and now > assignment.deadline
        if late and assignment.late_policy == "reject":
            raise QuizError(
                f"the deadline for {assignment.slug} passed at {iso(assignment.deadline)}")
        used = session.scalar(select(func.count(QuizAttempt.id)).where(
            QuizAttempt.user_id == user.id, QuizAttempt.assignment_id == assignment.id))
        if assignment.max_attempts is not None and used >= assignment.max_attempts:
            raise QuizError(f"no attempts left: {used} of {assignment.max_attempts} used")
    attempt = QuizAttempt(assignment=assignment, user=user, lang=lang, started_at=now)
    bank = _bank()
    for position, qid in enumerate(assignment.question_ids or []):
        if qid not in bank:
            continue  # a question removed from the bank after the quiz was set up
        attempt.answers.append(QuizAnswer(
            question_id=qid, position=position, seed=variant_seed(student_key(user), qid),
            max_points=bank.get(qid).points))
    session.add(attempt)
    session.flush()
    return attempt


def rendered_questions(attempt: QuizAttempt, lang: str | None = None) -> list[dict]:
    """What the student sees: each question rendered for their variant, with their answer."""
    from questions.variants import render

    bank = _bank()
    out = []
    for answer in attempt.answers:
        shown = render(bank.get(answer.question_id), answer.seed, lang or attempt.lang)
        out.append({"question_id": answer.question_id, "question": shown,
                    "answer": answer.answer, "correct": answer.correct, "points": answer.points,
                    "max_points": answer.max_points, "feedback": answer.feedback})
    return out


def answer_question(session: Session, attempt: QuizAttempt, question_id: str, answer, *,
                    lang: str | None = None, sandbox: str = "auto", now=None) -> QuizAnswer:
    """Grade and store an answer (replacing an earlier one while the attempt is open)."""
    from questions.answers import AnswerFormatError, grade_answer

    if attempt.status != "open":
        raise QuizError("this attempt is already submitted")
    row = next((a for a in attempt.answers if a.question_id == question_id), None)
    if row is None:
        raise QuizError(f"question {question_id!r} is not part of this quiz")
    try:
        result = grade_answer(_question(question_id), row.seed, answer, lang or attempt.lang,
                              sandbox=sandbox)
    except AnswerFormatError as exc:
        raise QuizError(str(exc)) from None
    row.answer, row.correct, row.points = answer, result.correct, float(result.points)
    row.max_points, row.feedback = float(result.max_points), result.feedback
    row.details, row.answered_at = result.details, now or utcnow()
    session.flush()
    return row


def _total(attempt: QuizAttempt) -> None:
    attempt.score = sum(a.points for a in attempt.answers)
    attempt.max_score = sum(a.max_points for a in attempt.answers)
    attempt.needs_manual = any(a.answered_at is not None and a.correct is None
                               for a in attempt.answers)


def submit_attempt(session: Session, attempt: QuizAttempt, now=None) -> QuizAttempt:
    """Close the attempt and total its points (unanswered questions score 0)."""
    if attempt.status != "open":
        raise QuizError("this attempt is already submitted")
    attempt.status, attempt.submitted_at = "submitted", now or utcnow()
    _total(attempt)
    session.flush()
    return attempt


def pending_manual(session: Session, assignment: Assignment) -> list[QuizAnswer]:
    """Answers of submitted attempts that wait for an instructor."""
    return list(session.scalars(
        select(QuizAnswer).join(QuizAttempt)
        .where(QuizAttempt.assignment_id == assignment.id, QuizAttempt.status == "submitted",
               QuizAnswer.answered_at.is_not(None), QuizAnswer.correct.is_(None))
        .options(joinedload(QuizAnswer.attempt).joinedload(QuizAttempt.user),
                 joinedload(QuizAnswer.attempt).joinedload(QuizAttempt.assignment))
        .order_by(QuizAnswer.id)))  # the grading page shows each answer's student: no N+1


def grade_answer_manually(session: Session, grader: User, answer: QuizAnswer, points: float,
                          comment: str = "") -> ManualGrade:
    """An instructor's points for an answer; the attempt's total follows."""
    if not grader.is_instructor:
        raise PermissionError("only instructors grade answers")
    if not 0 <= points <= answer.max_points:
        raise QuizError(f"points must be between 0 and {answer.max_points}")
    grade = ManualGrade(grader=grader, quiz_answer=answer, points=points,
                        max_points=answer.max_points, comment=comment)
    session.add(grade)
    answer.points, answer.correct = points, points >= answer.max_points
    if comment:
        answer.feedback = comment
    _total(answer.attempt)
    session.flush()
    return grade


def grade_submission_manually(session: Session, grader: User, submission: Submission,
                              points: float, comment: str = "") -> ManualGrade:
    """Override a code submission's score (the automatic results stay on record)."""
    if not grader.is_instructor:
        raise PermissionError("only instructors grade submissions")
    top = submission.max_score
    if points < 0 or (top is not None and points > top):
        raise SubmissionRejected(f"points must be between 0 and {top}")
    grade = ManualGrade(grader=grader, submission=submission, points=points, max_points=top,
                        comment=comment)
    session.add(grade)
    submission.score = points
    session.flush()
    return grade
