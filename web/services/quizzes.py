"""Quiz attempts: each student gets their own variant of every question, graded on answer.

The question bank (``questions``) renders and grades; this module stores what was shown
(the variant seed), every answer sent (``QuizTry``, the first one kept for the statistics)
and the points, and lets instructors grade answers the bank leaves to a person
(``correct is None``) or override a grade.

Integrity rules:

- Variants are an HMAC under the server's quiz secret (``web.config.quiz_secret``), so the
  package a student installs cannot compute anyone's numbers or answer key.
- Code answers are never run here: they become a ``GradingJob`` for the sandboxed grading
  workers (``quiz_grading``), and the answer is ``pending`` until a worker stores its verdict.
- The assignment's ``answer_policy`` decides how often a question may be answered: one try
  (final, its feedback shown after it), or several tries each wrong one costing
  ``try_penalty`` of the points (``quiz_policy``). The feedback, which carries the worked
  solution, is shown only once a question is final.
"""
from __future__ import annotations

import logging
import threading

from flask_babel import gettext
from sqlalchemy import func, select
from sqlalchemy.orm import Session, joinedload, selectinload

from ..models import (Assignment, GradingJob, ManualGrade, QuizAnswer, QuizAttempt, QuizTry,
                      Submission, User, utcnow)
from . import quiz_policy
from .extensions import limits_for, lock_student
from .submissions import DEFAULT_MAX_BYTES, SubmissionRejected, decode_source, iso

log = logging.getLogger(__name__)


class QuizError(ValueError):
    """An answer or attempt that is not accepted; the message is for the student."""


_loaded_bank: tuple[tuple, object] | None = None  # (fingerprint of its files, the Bank)
_bank_lock = threading.Lock()


def question_bank():
    """The question bank, parsed once and parsed again whenever its files change.

    Each web process keeps its own copy, so a copy is checked against the files
    (``bank_fingerprint``: one stat a file) on every use: an edit, a ``git pull`` or the
    instructor's "reload" reaches every gunicorn worker, not only the one that served it.
    """
    global _loaded_bank
    from questions.model import bank_fingerprint, load_bank

    fingerprint = bank_fingerprint()  # taken before loading: a change made meanwhile reloads again
    loaded = _loaded_bank
    if loaded is None or loaded[0] != fingerprint:
        with _bank_lock:
            if _loaded_bank is None or _loaded_bank[0] != fingerprint:
                _loaded_bank = (fingerprint, load_bank())
            loaded = _loaded_bank
    return loaded[1]


def _question(question_id: str):
    return question_bank().get(question_id)


def student_key(user: User, attempt_number: int = 1) -> str:
    """What a student's variants are derived from: stable for the account's lifetime.

    A second or later attempt at the same quiz gets fresh variants (new numbers, new option
    order), so seeing the worked solutions of one attempt does not hand over the next.
    """
    return f"user:{user.id}" if attempt_number <= 1 else f"user:{user.id}:attempt:{attempt_number}"


def _with_answers():
    """The attempt's answers, their tries and manual grades in three queries, not one per row."""
    answers = selectinload(QuizAttempt.answers)
    return (answers.selectinload(QuizAnswer.tries),
            answers.selectinload(QuizAnswer.manual_grades))


def open_attempt(session: Session, user: User, assignment: Assignment, *,
                 lock: bool = False) -> QuizAttempt | None:
    """The student's open attempt. ``lock``: for a request that answers or starts one, first
    wait for the student's other such requests (``lock_student``) and read it afresh, so that
    answers sent at once are counted one after another against the answer policy."""
    query = select(QuizAttempt).where(
        QuizAttempt.user_id == user.id, QuizAttempt.assignment_id == assignment.id,
        QuizAttempt.status == "open").options(*_with_answers())
    if lock:
        lock_student(session, user)
        query = query.execution_options(populate_existing=True)
    return session.scalar(query)


def get_attempt(session: Session, attempt_id: int) -> QuizAttempt | None:
    return session.get(QuizAttempt, attempt_id, options=_with_answers())


def attempt_numbers(session: Session, user_id: int, assignment_id: int) -> dict[int, int]:
    """Quiz attempt id -> the student's own number for it (1 for their first), as a task's
    attempts are numbered: the global id says nothing to a student."""
    ids = session.scalars(select(QuizAttempt.id).where(
        QuizAttempt.user_id == user_id, QuizAttempt.assignment_id == assignment_id)
        .order_by(QuizAttempt.id))
    return {attempt_id: number for number, attempt_id in enumerate(ids, start=1)}


def students_attempt_numbers(session: Session, user_ids) -> dict[int, int]:
    """``attempt_numbers`` for every quiz attempt of these students, in one query (the grading
    queue names each answer's attempt as its student does: "Attempt 1", not the id)."""
    seen: dict[tuple, int] = {}
    numbers: dict[int, int] = {}
    for attempt_id, user_id, assignment_id in session.execute(
            select(QuizAttempt.id, QuizAttempt.user_id, QuizAttempt.assignment_id)
            .where(QuizAttempt.user_id.in_(list(user_ids))).order_by(QuizAttempt.id)):
        seen[user_id, assignment_id] = numbers[attempt_id] = seen.get((user_id, assignment_id), 0) + 1
    return numbers


def outline(assignment: Assignment) -> dict:
    """What the landing page tells before a start: how many questions, how many points."""
    bank = question_bank()
    questions = [bank.get(qid) for qid in assignment.question_ids or [] if qid in bank]
    return {"questions": len(questions), "points": sum(q.points for q in questions),
            "code": sum(q.kind == "code" for q in questions),
            "free_text": sum(q.kind == "free_text" for q in questions)}


def unanswered(attempt: QuizAttempt) -> list[int]:
    """The numbers (from 1, as the page numbers them) of the questions with no answer sent."""
    return [n for n, row in enumerate(attempt.answers, start=1) if row.answered_at is None]


def start_attempt(session: Session, user: User, assignment: Assignment,
                  lang: str = "en", now=None, *, secret: bytes) -> QuizAttempt:
    """The student's open attempt, or a new one (subject to deadline and attempt limits).

    ``secret`` is the server's quiz secret (``web.config.quiz_secret(config)``).
    """
    from questions.variants import variant_seed

    if assignment.kind != "quiz":
        raise QuizError(gettext("%(slug)s is not a quiz", slug=assignment.slug))
    existing = open_attempt(session, user, assignment, lock=True)
    if existing is not None:
        return existing
    now = now or utcnow()
    used = session.scalar(select(func.count(QuizAttempt.id)).where(
        QuizAttempt.user_id == user.id, QuizAttempt.assignment_id == assignment.id))
    if not user.is_instructor:
        limits = limits_for(session, user, assignment)  # the student's own, with an extension
        late = limits.deadline and now > limits.deadline
        if late and assignment.late_policy == "reject":
            raise QuizError(
                gettext("the deadline for %(slug)s passed at %(when)s", slug=assignment.slug,
                        when=iso(limits.deadline)))
        if limits.max_attempts is not None and used >= limits.max_attempts:
            raise QuizError(gettext("no attempts left: %(used)s of %(allowed)s used", used=used,
                                    allowed=limits.max_attempts))
    attempt = QuizAttempt(assignment=assignment, user=user, lang=lang, started_at=now)
    key = student_key(user, used + 1)
    bank = question_bank()
    placed = set()
    for position, qid in enumerate(assignment.question_ids or []):
        if qid not in bank or qid in placed:
            continue  # removed from the bank after the quiz was set up, or listed twice (one answer each)
        placed.add(qid)
        attempt.answers.append(QuizAnswer(
            question_id=qid, position=position, seed=variant_seed(key, qid, secret),
            max_points=bank.get(qid).points))
    session.add(attempt)
    session.flush()
    return attempt


def rendered_questions(attempt: QuizAttempt, lang: str | None = None) -> list[dict]:
    """What the student sees: each question rendered for their variant, with their answer.

    ``feedback`` is the full feedback only once the question is final; before that it is
    the policy's short verdict ("not right yet, N tries left"), never the worked solution.
    ``review`` (once final, else None): the options, order, pairs or value with the student's
    answer and the key marked, and the worked solution (``quiz_policy.final_review``).
    """
    from questions.variants import render

    bank = question_bank()
    out = []
    for answer in attempt.answers:
        question = bank.get(answer.question_id)
        shown = render(question, answer.seed, lang or attempt.lang)
        out.append({"question_id": answer.question_id, "question": shown,
                    "answer": answer.answer, "correct": answer.correct, "points": answer.points,
                    "max_points": answer.max_points,
                    "feedback": quiz_policy.visible_feedback(attempt, answer),
                    "review": quiz_policy.final_review(attempt, answer, question, lang or attempt.lang),
                    "tries": quiz_policy.try_summary(attempt, answer)})
    return out


class AnswerRefused(QuizError):
    """An answer that cannot be read as its kind asks (no try is counted); the message, in the
    reader's language, says how to write it."""


def format_hint(question, answer, error: Exception | None = None) -> str:
    """Why a typed answer could not be read, in the interface's language.

    The bank's parsers explain in English; a student reads the rule for the question's kind,
    with an example that is a format and never this question's key. An answer that names no
    option of a choice question (a forged or stale form) is told so, not that it is no number;
    the other kinds keep the parser's own explanation (``error``)."""
    typed = answer if isinstance(answer, str) else ""
    if question.kind in ("single", "multiple", "ordering", "matching"):
        return gettext("This answer is not one of this question's options: choose among those shown.")
    if question.kind not in ("numeric", "matrix", "shape", "big_o") and error is not None:
        return str(error)
    if question.kind == "shape":
        return gettext("“%(answer)s” is not a shape: write the sizes in brackets, separated by commas, "
                       "such as (3, 5) for a 3 × 5 matrix.", answer=typed)
    if question.kind == "big_o":
        return gettext("“%(answer)s” is not a complexity this page can read: write it like O(n^2 d) or "
                       "O(n log n), with the variables %(names)s.", answer=typed,
                       names=", ".join(question.data.get("variables") or []))
    if question.kind == "matrix" and isinstance(answer, (list, tuple)):
        return gettext("An entry of the matrix is not a number: write each like 0.125, 1/8 or 1e-3.")
    return gettext("“%(answer)s” is not a number: write it like 0.125, 1/8 or 1e-3.", answer=typed)


def answer_question(session: Session, attempt: QuizAttempt, question_id: str, answer, *,
                    lang: str | None = None, now=None, dispatcher=None,
                    max_job_attempts: int = 3,
                    max_code_bytes: int = DEFAULT_MAX_BYTES) -> QuizAnswer:
    """Store a try at a question and grade it, as the quiz's answer policy allows.

    Choice, numeric, ordering and matching answers are graded here (no student code runs);
    a code answer is committed with its grading job and the workers are notified, so it
    comes back ``pending`` and a worker grades it in the sandbox. A free-text answer is
    saved for the instructor and may be revised until the quiz is submitted.
    """
    from questions.answers import AnswerFormatError, grade_answer

    if attempt.status != "open":
        raise QuizError(gettext("this attempt is already submitted"))
    row = next((a for a in attempt.answers if a.question_id == question_id), None)
    if row is None:
        raise QuizError(gettext("question %(id)s is not part of this quiz", id=repr(question_id)))
    refusal = quiz_policy.why_closed(attempt.assignment, row)
    if refusal:
        raise QuizError(refusal)
    now = now or utcnow()
    question = _question(question_id)
    if question.kind == "code":
        return _queue_code_try(session, attempt, row, answer, now, dispatcher, max_job_attempts,
                               max_code_bytes)
    try:
        result = grade_answer(question, row.seed, answer, lang or attempt.lang)
    except AnswerFormatError as exc:
        raise AnswerRefused(format_hint(question, answer, exc)) from None
    tried = QuizTry(number=len(row.tries) + 1, answer=answer, status="pending",
                    max_points=float(result.max_points), created_at=now)
    row.tries.append(tried)
    row.answer, row.answered_at, row.lang = answer, now, lang or attempt.lang
    quiz_policy.apply_result(attempt, row, tried, result.to_dict(), now)
    session.flush()
    return row


def _queue_code_try(session, attempt, row, code, now, dispatcher, max_job_attempts,
                    max_code_bytes) -> QuizAnswer:
    if not isinstance(code, str):
        raise QuizError(gettext("expected Python source code as a string"))
    try:
        code = decode_source(code, max_code_bytes)
    except SubmissionRejected as exc:
        raise QuizError(exc.message) from None
    tried = QuizTry(number=len(row.tries) + 1, answer=code, status="pending",
                    max_points=row.max_points, created_at=now)
    row.tries.append(tried)
    row.answer, row.answered_at, row.state = code, now, "pending"
    job = GradingJob(quiz_try=tried, queue="cpu", status="queued", max_attempts=max_job_attempts,
                     queued_at=now, notified_at=now)
    session.add(job)
    session.commit()  # the answer and its job first, then the delivery (as for submissions)
    if dispatcher is not None:
        try:
            dispatcher.notify([(job.id, job.queue)])
        except Exception:  # the reconciler re-notifies queued jobs; the answer is not lost
            log.exception("could not notify workers of quiz job %s; the reconciler will", job.id)
    return row


def submit_attempt(session: Session, attempt: QuizAttempt, now=None) -> QuizAttempt:
    """Close the attempt and total its points (unanswered questions score 0).

    Every answer becomes final, except code answers still with the workers: they are
    totalled in when their verdict arrives.
    """
    if attempt.status != "open":
        raise QuizError(gettext("this attempt is already submitted"))
    attempt.status, attempt.submitted_at = "submitted", now or utcnow()
    for row in attempt.answers:
        if row.state != "pending":
            row.state = "final"
    quiz_policy.total(attempt)
    session.flush()
    return attempt


def pending_manual(session: Session, assignment: Assignment) -> list[QuizAnswer]:
    """Answers of submitted attempts that wait for an instructor."""
    return list(session.scalars(
        select(QuizAnswer).join(QuizAttempt)
        .where(QuizAttempt.assignment_id == assignment.id, QuizAttempt.status == "submitted",
               QuizAnswer.answered_at.is_not(None), QuizAnswer.correct.is_(None),
               QuizAnswer.state != "pending")
        .options(joinedload(QuizAnswer.attempt).joinedload(QuizAttempt.user),
                 joinedload(QuizAnswer.attempt).joinedload(QuizAttempt.assignment))
        .order_by(QuizAnswer.id)))  # the grading page shows each answer's student: no N+1


def grade_answer_manually(session: Session, grader: User, answer: QuizAnswer, points: float,
                          comment: str = "") -> ManualGrade:
    """An instructor's points for an answer; the attempt's total follows."""
    if not grader.is_instructor:
        raise PermissionError("only instructors grade answers")
    if not 0 <= points <= answer.max_points:
        raise QuizError(gettext("points must be between 0 and %(max)s", max=answer.max_points))
    grade = ManualGrade(grader=grader, quiz_answer=answer, points=points,
                        max_points=answer.max_points, comment=comment)
    session.add(grade)
    answer.points, answer.correct = points, points >= answer.max_points
    if comment:
        answer.feedback = comment
    quiz_policy.total(answer.attempt)
    session.flush()
    return grade


def grade_submission_manually(session: Session, grader: User, submission: Submission,
                              points: float, comment: str = "") -> ManualGrade:
    """Override a code submission's score (the automatic results stay on record)."""
    if not grader.is_instructor:
        raise PermissionError("only instructors grade submissions")
    top = submission.max_score
    if points < 0 or (top is not None and points > top):
        raise SubmissionRejected(gettext("points must be between 0 and %(max)s", max=top))
    grade = ManualGrade(grader=grader, submission=submission, points=points, max_points=top,
                        comment=comment)
    session.add(grade)
    submission.score = points
    session.flush()
    return grade
