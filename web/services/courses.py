"""The course and its assignments; one default course holds the chapter."""
from __future__ import annotations

from flask_babel import lazy_gettext as _l
from sqlalchemy import select
from sqlalchemy.orm import Session

from ..models import Assignment, Course, Enrollment, User

DEFAULT_COURSE_SLUG = "attention"
DEFAULT_COURSE_TITLE = "Attention chapter"


def chapter_tasks() -> list[tuple[str, str]]:
    """(task id, title) for every task the grader knows, in its order."""
    from grader.tasks import TASKS

    return [(task_id, task.title) for task_id, task in TASKS.items()]


# The demo course's quiz: one or two questions per topic of the chapter and every kind of
# question (a test checks both), short enough for one sitting. The rest of the bank stays
# available: an instructor adds questions on the assignment's settings page.
CHAPTER_QUIZ = (
    "soft-lookup", "qkv-roles", "sdpa-steps-order", "why-scale-by-sqrt-dk",
    "variance-of-dot-product", "variance-nonzero-mean-formula", "sqrt-not-dk", "saturated-softmax-effects",
    "hand-attention-output", "masking-value", "causal-mask-code", "head-dimension", "why-multiple-heads",
    "attention-kinds-sources", "permute-inputs", "positions-how-added", "parallel-property",
    "derive-score-variance", "masked-vs-unmasked", "kv-cache-shape", "kv-cache-memory-big-o",
)


# The built-in titles, shown in each reader's language: a grader task's from its translated spec's
# heading (``Task.title_in``: the one source the CLI's `attn-grader tasks` reads too), the quiz's from
# this catalogue. A title the instructor typed on the settings page is theirs, shown as typed in
# every language: the page cannot translate it (review 3, P6; docs/instructors/web-app.md says so).
QUIZ_TITLE = "Self-check quiz"


def shown_title(assignment) -> str:
    """The assignment's title as the reader sees it: a built-in one translated, the rest as typed."""
    from grader.tasks import TASKS

    from ..i18n import interface_language

    if assignment.title == QUIZ_TITLE:
        return str(_l("Self-check quiz"))
    task = next((t for t in TASKS.values() if t.title == assignment.title), None)
    return task.title_in(interface_language()) if task is not None else assignment.title


def chapter_question_ids() -> list[str]:
    """The chapter quiz's question ids that the bank has (all of the bank if none match)."""
    from questions import load_bank

    bank = load_bank()
    chosen = [qid for qid in CHAPTER_QUIZ if qid in bank]
    return chosen or [q.id for q in bank]


def default_course(session: Session) -> Course | None:
    return session.scalar(select(Course).where(Course.slug == DEFAULT_COURSE_SLUG))


def ensure_default_course(session: Session) -> Course:
    """The default course with one assignment per grader task and one quiz (idempotent)."""
    course = default_course(session)
    if course is None:
        course = Course(slug=DEFAULT_COURSE_SLUG, title=DEFAULT_COURSE_TITLE)
        session.add(course)
        session.flush()
    existing = {a.slug for a in course.assignments}
    position = len(existing)
    for task_id, title in chapter_tasks():
        if task_id not in existing:
            session.add(Assignment(course=course, slug=task_id, title=title, kind="task",
                                   task_id=task_id, position=position))
            position += 1
    if "quiz" not in existing:
        session.add(Assignment(course=course, slug="quiz", title=QUIZ_TITLE, kind="quiz",
                               question_ids=chapter_question_ids(), position=position))
    session.flush()
    return course


def enroll(session: Session, course: Course, user: User) -> Enrollment:
    row = session.scalar(select(Enrollment).where(Enrollment.course_id == course.id,
                                                  Enrollment.user_id == user.id))
    if row is None:
        row = Enrollment(course=course, user=user, role=user.role)
        session.add(row)
        session.flush()
    return row


def find_assignment(session: Session, ref: str, course: Course | None = None) -> Assignment | None:
    """The assignment whose slug or task id is ``ref`` in ``course`` (default course)."""
    course = course or default_course(session)
    if course is None:
        return None
    for assignment in course.assignments:
        if assignment.slug == ref:
            return assignment
    for assignment in course.assignments:
        if assignment.task_id == ref:
            return assignment
    return None


def task_assignments(session: Session, course: Course | None = None,
                     include_hidden: bool = False) -> list[Assignment]:
    course = course or default_course(session)
    if course is None:
        return []
    return [a for a in course.assignments
            if a.kind == "task" and (a.visible or include_hidden)]


def points_possible(assignment: Assignment) -> float:
    """An assignment's maximum: a task's points (100), a quiz's questions' points. What an
    LMS is told (a deep-linked line item, the Canvas CSV's "Points Possible" row)."""
    if assignment.kind == "quiz":
        from questions.model import load_bank
        bank = load_bank()
        return float(sum(bank.get(q).points for q in assignment.question_ids or []
                         if bank.get(q) is not None)) or 1.0
    from grader.tasks import TASKS
    task = TASKS.get(assignment.task_id)
    return float(sum(task.points.values())) if task else 100.0
