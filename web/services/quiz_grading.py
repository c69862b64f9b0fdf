"""Quiz code answers on the grading workers: what a worker runs, and how its verdict is stored.

The web process only queues a code answer (``quizzes.answer_question``); a grading worker
claims the job through the same claim/lease/fence path as submissions
(``web.dispatch.claim``), runs ``grade_code_try`` (the student's function in the sandbox,
compared in the worker with the trusted reference) and stores the verdict fenced by its
attempt number. A worker that dies mid-job loses its lease; the job is retried, and after
``max_attempts`` the answer is marked "not graded" with the reason (``fail_job``), never lost.
"""
from __future__ import annotations

from sqlalchemy.orm import Session

from ..models import QuizTry, utcnow
from . import quiz_policy


def grade_code_try(question_id: str, seed: int, code: str, lang: str, *,
                   sandbox: str = "auto") -> dict:
    """Grade one code answer: runs only in a grading worker (it executes student code)."""
    from questions.answers import grade_answer

    from .quizzes import _question

    return grade_answer(_question(question_id), seed, code, lang, sandbox=sandbox).to_dict()


def record_result(session: Session, quiz_try_id: int, result: dict, now=None) -> None:
    """Store a worker's verdict on the try, its question and the attempt's total."""
    tried = session.get(QuizTry, quiz_try_id)
    if tried is None:  # the attempt was deleted while the job ran
        return
    row = tried.quiz_answer
    quiz_policy.apply_result(row.attempt, row, tried, result, now or utcnow())


def fail_job(session: Session, quiz_try_id: int | None, reason: str, now=None) -> None:
    """The job was given up on (grading host lost, grader error): mark the answer with why."""
    tried = session.get(QuizTry, quiz_try_id) if quiz_try_id is not None else None
    if tried is not None and tried.status == "pending":
        quiz_policy.fail_try(tried, reason, now or utcnow())
