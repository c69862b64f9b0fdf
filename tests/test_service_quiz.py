"""Quiz attempts and manual grades stored in the database, graded by the question bank."""
import pytest
from sqlalchemy import select

from questions.answers import solution
from questions.model import load_bank
from web.db import session_factory
from web.models import User
from web.services import quizzes
from web.services.courses import find_assignment
from web.services.scores import scores_table

QUESTIONS = ["head-dimension", "masking-value", "chain-rule-attention"]


SECRET = b"quiz-test-secret"


@pytest.fixture
def quiz(service):
    session = session_factory(service.engine)()
    assignment = find_assignment(session, "quiz")
    assignment.question_ids = QUESTIONS + ["removed-from-the-bank"]
    session.commit()
    people = {name: session.scalar(select(User).where(User.email == f"{name}@example.org"))
              for name in ("ada", "bob", "prof")}
    yield session, assignment, people
    session.close()


def _right_answer(question_id, seed):
    sol = solution(load_bank().get(question_id), seed)
    return sol["value"] if "value" in sol else sol["tokens"][0]


def _wrong_option(question_id, seed):
    from questions.variants import token

    options = load_bank().get(question_id).data["options"]
    return token(seed, question_id, next(o["id"] for o in options if not o["correct"]))


def test_an_attempt_is_graded_per_answer_and_totalled(quiz):
    session, assignment, people = quiz
    attempt = quizzes.start_attempt(session, people["ada"], assignment, secret=SECRET)
    assert [a.question_id for a in attempt.answers] == QUESTIONS  # unknown ids are skipped
    assert quizzes.start_attempt(session, people["ada"], assignment, secret=SECRET) is attempt  # resumed
    seeds = {a.question_id: a.seed for a in attempt.answers}
    bobs = quizzes.start_attempt(session, people["bob"], assignment, secret=SECRET)
    assert seeds != {a.question_id: a.seed for a in bobs.answers}  # own variants

    shown = quizzes.rendered_questions(attempt)
    assert [q["question_id"] for q in shown] == QUESTIONS and shown[0]["question"]
    with pytest.raises(quizzes.QuizError, match="not one of this question's"):
        quizzes.answer_question(session, attempt, "masking-value", "not-an-option")
    with pytest.raises(quizzes.QuizError, match="is not a number"):  # the localised hint (P2)
        quizzes.answer_question(session, attempt, "head-dimension", "sixty-four")
    assert all(not a.tries for a in attempt.answers)  # unreadable answers are not tries
    right = quizzes.answer_question(session, attempt, "head-dimension",
                                    _right_answer("head-dimension", seeds["head-dimension"]))
    assert (right.correct, right.points) == (True, 1.0)
    wrong = quizzes.answer_question(session, attempt, "masking-value",
                                    _wrong_option("masking-value", seeds["masking-value"]))
    assert wrong.correct is False and wrong.points == 0.0
    free = quizzes.answer_question(session, attempt, "chain-rule-attention",
                                   "Gradients flow through softmax by the chain rule.")
    assert free.correct is None  # waits for an instructor
    with pytest.raises(quizzes.QuizError, match="one try per question"):
        quizzes.answer_question(session, attempt, "masking-value", _right_answer(
            "masking-value", seeds["masking-value"]))  # the default policy: one final try
    with pytest.raises(quizzes.QuizError, match="not part of this quiz"):
        quizzes.answer_question(session, attempt, "output-shape", "1")

    quizzes.submit_attempt(session, attempt)
    session.commit()
    assert (attempt.status, attempt.score, attempt.max_score, attempt.needs_manual) == \
        ("submitted", 1.0, 5.0, True)
    with pytest.raises(quizzes.QuizError, match="already submitted"):
        quizzes.answer_question(session, attempt, "head-dimension", "1")
    assert quizzes.pending_manual(session, assignment) == [free]

    with pytest.raises(PermissionError):
        quizzes.grade_answer_manually(session, people["bob"], free, 3.0)
    with pytest.raises(quizzes.QuizError, match="between 0 and 3"):
        quizzes.grade_answer_manually(session, people["prof"], free, 4.0)
    grade = quizzes.grade_answer_manually(session, people["prof"], free, 2.0, "Say which factor.")
    session.commit()
    assert (attempt.score, attempt.needs_manual, free.feedback) == (3.0, False, "Say which factor.")
    assert grade.grader == people["prof"] and free.manual_grades == [grade]

    rows = {(r["email"], r["assignment"]): r for r in scores_table(session, assignment.course)}
    assert (rows[("ada@example.org", "quiz")]["best_score"],
            rows[("ada@example.org", "quiz")]["attempts"]) == (3.0, 1)
    assert rows[("bob@example.org", "quiz")]["attempts"] == 0  # open attempts do not count


def test_attempt_limits_apply_to_quizzes(quiz):
    session, assignment, people = quiz
    assignment.max_attempts = 1
    quizzes.submit_attempt(session, quizzes.start_attempt(session, people["ada"], assignment, secret=SECRET))
    with pytest.raises(quizzes.QuizError, match="no attempts left: 1 of 1"):
        quizzes.start_attempt(session, people["ada"], assignment, secret=SECRET)
    with pytest.raises(quizzes.QuizError, match="not a quiz"):
        quizzes.start_attempt(session, people["ada"], find_assignment(session, "sdpa"), secret=SECRET)


def test_a_question_listed_twice_is_asked_once(quiz):
    """A quiz whose list names a question twice (an import or a script wrote it) still starts: one
    answer per question, in the place of its first mention."""
    session, assignment, people = quiz
    assignment.question_ids = [QUESTIONS[0], QUESTIONS[1], QUESTIONS[0]]
    session.commit()
    attempt = quizzes.start_attempt(session, people["ada"], assignment, secret=SECRET)
    session.commit()
    assert [a.question_id for a in sorted(attempt.answers, key=lambda a: a.position)] == QUESTIONS[:2]
