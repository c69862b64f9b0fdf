"""Quiz integrity, tried as a determined student would (issue 11, the web half).

- Code answers never run in the web process: they go to the grading workers through the job
  queue, show as pending, then graded; a lost worker or a broken grader leaves the answer
  kept and marked with the reason.
- Variants are keyed by the server's secret: the CLI a student installs cannot compute them.
- The attempt policy: one final try, or penalised tries that never reveal the worked
  solution early and cannot be brute-forced for full credit; every try is stored and the
  statistics read the first.
"""
from __future__ import annotations

import re
from datetime import timedelta

import pytest
from click.testing import CliRunner

from pages_support import ada, bob, db_session, env, prof  # noqa: F401

CODE, SINGLE, NUMERIC = "scaled-scores-code", "sqrt-not-dk", "head-dimension"


def _set_quiz(env, question_ids, policy="single_try", penalty=1 / 3):
    from web.models import Assignment
    with db_session(env) as session:
        quiz = session.query(Assignment).filter_by(slug="quiz").one()
        quiz.question_ids, quiz.answer_policy, quiz.try_penalty = question_ids, policy, penalty
        session.commit()


def _row(env, email, qid):
    """ada's (or bob's) newest answer row for ``qid``, with its tries and its attempt."""
    from sqlalchemy.orm import selectinload

    from web.models import QuizAnswer, QuizAttempt, User
    with db_session(env) as session:
        row = (session.query(QuizAnswer).join(QuizAttempt).join(User)
               .filter(User.email == email, QuizAnswer.question_id == qid)
               .options(selectinload(QuizAnswer.tries), selectinload(QuizAnswer.attempt))
               .order_by(QuizAnswer.id.desc()).first())
        session.expunge_all()
        return row


def _options(env, email, qid):
    """(right token, [wrong tokens]) of the student's variant, from the stored seed."""
    from questions.model import load_bank
    from questions.variants import token
    seed = _row(env, email, qid).seed
    options = load_bank().get(qid).data["options"]
    right = next(token(seed, qid, o["id"]) for o in options if o["correct"])
    return right, [token(seed, qid, o["id"]) for o in options if not o["correct"]]


def _explanation(env, email, qid):
    from questions.model import load_bank
    from questions.variants import params_for, substitute
    question, seed = load_bank().get(qid), _row(env, email, qid).seed
    return substitute(question.data["explanation"]["en"], params_for(question, seed), "en")


def _right_number(env, email, qid=NUMERIC):
    from questions.answers import solution
    from questions.model import load_bank
    return solution(load_bank().get(qid), _row(env, email, qid).seed)["value"]


def _answer(client, qid, field, value):
    return client.post(f"/quiz/quiz/questions/{qid}", data={f"q-{qid}-{field}": value},
                       follow_redirects=True).get_data(as_text=True)


def prof_jobs(env):
    from pages_support import sign_in
    client = env.app.test_client()
    sign_in(client, "prof@example.org")
    return client.get("/instructor/jobs").get_data(as_text=True)


def _worker(env, **kwargs):
    from pages_support import fake_grade
    from web.dispatch.worker import GradingWorker
    return GradingWorker(env.engine, env.config, grade_fn=fake_grade, name="quiz-worker",
                         **kwargs)


# ---- code answers go to the grading workers -----------------------------------------------

def _model_solution(qid=CODE):
    from questions.model import load_bank
    return load_bank().get(qid).data["model_solution"]


def test_a_code_answer_is_queued_never_run_in_the_web_process_then_graded(env, ada, monkeypatch):
    import grader.sandbox
    import questions.codecheck
    from web.models import GradingJob

    _set_quiz(env, [CODE, NUMERIC])
    ada.post("/quiz/quiz/start")

    def ran_student_code(*args, **kwargs):
        raise AssertionError("student code ran in the web process")
    monkeypatch.setattr(questions.codecheck, "grade_code", ran_student_code)
    monkeypatch.setattr(grader.sandbox, "SandboxSession", ran_student_code)
    page = _answer(ada, CODE, "code", _model_solution())
    assert "Being graded" in page and "data-quiz-status-url" in page
    assert f'<noscript><a href="/quiz/quiz#q-{CODE}">Reload to see it</a>' in page  # no-JS path
    row = _row(env, "ada@example.org", CODE)
    assert row.state == "pending" and [t.status for t in row.tries] == ["pending"]
    with db_session(env) as session:
        job = session.query(GradingJob).filter(GradingJob.quiz_try_id.is_not(None)).one()
        assert (job.status, job.queue, job.submission_id) == ("queued", "cpu", None)
    status_url = f"/quiz/attempts/{row.attempt_id}/questions/{CODE}/status.json"
    assert ada.get(status_url).get_json()["pending"] is True
    again = _answer(ada, CODE, "code", "def scaled_scores(q, k):\n    return q\n")
    assert "still being graded" in again  # no second try while the first is with a worker
    assert "quiz answer: " + CODE in prof_jobs(env)  # the job monitor names it
    monkeypatch.undo()

    assert _worker(env).run_once(("cpu",)) == "done"  # a grading worker, in the sandbox
    row = _row(env, "ada@example.org", CODE)
    assert (row.state, row.correct, row.points, row.max_points) == ("final", True, 2.0, 2.0)
    assert row.tries[0].status == "graded" and row.tries[0].fraction == 1.0
    status = ada.get(status_url).get_json()
    assert status["pending"] is False and "2 / 2" in status["html"]
    assert "2 / 2" in ada.get("/quiz/quiz").get_data(as_text=True)


def test_a_code_answer_pending_at_submission_is_totalled_when_graded(env, ada):
    _set_quiz(env, [CODE])
    ada.post("/quiz/quiz/start")
    _answer(ada, CODE, "code", "def scaled_scores(q, k):\n    return q @ k.transpose(-2, -1)\n")
    attempt_url = ada.post("/quiz/quiz/submit", data={"confirmed": "yes"}).location
    page = ada.get(attempt_url).get_data(as_text=True)
    assert "Being graded" in page and 'http-equiv="refresh"' in page  # the no-JS fallback
    assert _worker(env).run_once(("cpu",)) == "done"
    row = _row(env, "ada@example.org", CODE)
    assert (row.state, row.correct, row.points) == ("final", False, 0.0)  # no 1/sqrt(d_k)
    assert row.attempt.score == 0.0 and row.attempt.needs_manual is False
    page = ada.get(attempt_url).get_data(as_text=True)
    assert "0 / 2" in page and 'http-equiv="refresh"' not in page


def test_a_worker_lost_mid_job_leaves_the_answer_kept_with_the_reason(env, ada, prof):
    from web.dispatch import claim as claims
    from web.services.grading import reconcile_jobs as reconcile
    from web.models import utcnow

    _set_quiz(env, [CODE])
    ada.post("/quiz/quiz/start")
    code = _model_solution()
    _answer(ada, CODE, "code", code)
    now = utcnow()
    for attempt in range(1, 4):  # three workers each claim the job and die holding it
        held = claims.claim_next(env.engine, f"doomed-{attempt}", ("cpu",), 2.0,
                                 now=now + timedelta(seconds=10 * attempt))
        assert held is not None and held.attempt == attempt and held.quiz_try_id is not None
        assert held.code == code and held.question_id == CODE
    report = reconcile(env.engine, now=now + timedelta(seconds=60))
    assert len(report.failed) == 1
    row = _row(env, "ada@example.org", CODE)
    assert row.state == "open" and row.tries[0].status == "failed"
    assert "grading host lost" in row.tries[0].error and row.tries[0].answer == code
    page = ada.get("/quiz/quiz").get_data(as_text=True)
    assert "Not graded" in page and "grading host lost" in page
    assert "Failed" in prof.get("/instructor/jobs").get_data(as_text=True)
    assert "quiz answer: " + CODE in prof.get("/instructor/jobs").get_data(as_text=True)

    _answer(ada, CODE, "code", code)  # a lost grading does not use up the student's try
    assert _worker(env).run_once(("cpu",)) == "done"
    row = _row(env, "ada@example.org", CODE)
    assert [t.status for t in row.tries] == ["failed", "graded"] and row.points == 2.0


def test_a_grader_error_is_retried_then_failed_and_reaches_the_instructor(env, ada, prof):
    def broken(*args, **kwargs):
        raise RuntimeError("quiz grader machinery broke")

    _set_quiz(env, [CODE])
    ada.post("/quiz/quiz/start")
    _answer(ada, CODE, "code", _model_solution())
    ada.post("/quiz/quiz/submit", data={"confirmed": "yes"})
    worker = _worker(env, quiz_grade_fn=broken)
    assert [worker.run_once(("cpu",)) for _ in range(3)] == ["queued", "queued", "failed"]
    row = _row(env, "ada@example.org", CODE)
    assert row.state == "final" and row.correct is None and row.tries[0].status == "failed"
    assert "quiz grader machinery broke" in row.tries[0].error
    queue = prof.get("/instructor/grading").get_data(as_text=True)
    assert "ada@example.org" in queue and "scaled_scores" in queue  # graded by hand instead


# ---- variants are keyed by the server's secret ------------------------------------------

def test_variants_need_the_servers_secret(env, ada):
    from questions.variants import variant_seed
    from web.config import quiz_secret
    from web.services.users import find_user

    ada.post("/quiz/quiz/start")
    with db_session(env) as session:
        user_id = find_user(session, "ada@example.org").id
    stored = _row(env, "ada@example.org", NUMERIC).seed
    key = f"user:{user_id}"
    assert stored == variant_seed(key, NUMERIC, quiz_secret(env.config))
    assert stored != variant_seed(key, NUMERIC)  # what the shipped package computes alone
    assert stored != variant_seed(key, NUMERIC, quiz_secret({"SECRET_KEY": "another server"}))
    assert quiz_secret({"QUIZ_SECRET": "dedicated", "SECRET_KEY": "x"}) == b"dedicated"

    runner = CliRunner()
    laptop = {"ATTN_GRADER_QUIZ_SECRET": None, "ATTN_GRADER_SECRET_KEY": None,
              "ATTN_GRADER_INSTANCE_PATH": str(env.tmp_path / "no-instance-here")}
    from grader.cli import main
    result = runner.invoke(main, ["questions", "show", NUMERIC, "--student", key, "--answer"],
                           env=laptop)
    assert result.exit_code == 1 and "no quiz secret is set here" in result.output
    server = {**laptop, "ATTN_GRADER_SECRET_KEY": env.config["SECRET_KEY"]}
    result = runner.invoke(main, ["questions", "show", NUMERIC, "--student", key, "--answer"],
                           env=server)
    from questions.answers import solution
    from questions.model import load_bank
    value = solution(load_bank().get(NUMERIC), stored)["value"]
    assert result.exit_code == 0 and re.search(rf'"value": {value:g}(\.0)?\b', result.output)
    preview = runner.invoke(main, ["questions", "show", NUMERIC], env=laptop)
    assert preview.exit_code == 0 and "public preview variant" in preview.output


def test_a_second_attempt_gets_fresh_variants(env, ada):
    ada.post("/quiz/quiz/start")
    first = _row(env, "ada@example.org", NUMERIC).seed
    ada.post("/quiz/quiz/submit", data={"confirmed": "yes"})
    ada.post("/quiz/quiz/start")
    assert _row(env, "ada@example.org", NUMERIC).seed != first


# ---- the attempt policy -------------------------------------------------------------------

def test_one_try_is_final_and_its_feedback_comes_after_it(env, ada):
    _set_quiz(env, [NUMERIC, SINGLE])
    ada.post("/quiz/quiz/start")
    page = _answer(ada, NUMERIC, "number", "7")
    assert 'class="feedback wrong"' in page and _explanation(env, "ada@example.org", NUMERIC) in page
    assert f'name="q-{NUMERIC}-number"' not in page  # no form: the question is closed
    page = _answer(ada, NUMERIC, "number", str(_right_number(env, "ada@example.org")))
    assert "Answer not accepted: this quiz allows one try per question" in page
    row = _row(env, "ada@example.org", NUMERIC)
    assert [t.answer for t in row.tries] == ["7"] and row.points == 0.0


def test_penalised_tries_hide_the_solution_and_cost_a_share(env, ada):
    _set_quiz(env, [NUMERIC, SINGLE], policy="penalised_tries", penalty=1 / 3)
    ada.post("/quiz/quiz/start")
    explanation = _explanation(env, "ada@example.org", NUMERIC)
    page = _answer(ada, NUMERIC, "number", "7")
    assert "Not right yet. Try 1 of 3" in page and "67%" in page
    assert explanation not in page  # the worked solution stays hidden while tries remain
    assert f'name="q-{NUMERIC}-number"' in page  # another try is offered
    page = _answer(ada, NUMERIC, "number", str(_right_number(env, "ada@example.org")))
    assert re.search(r'class="feedback correct"><strong>0.67 / 1</strong>', page)
    assert explanation in page  # final now: right, so the solution is shown
    row = _row(env, "ada@example.org", NUMERIC)
    assert [(t.number, t.correct, t.points) for t in row.tries] == \
        [(1, False, 0.0), (2, True, 0.666667)]
    assert row.state == "final"


def test_a_wrong_code_try_shows_the_failing_call_but_not_the_explanation(env, ada):
    from questions.model import load_bank
    _set_quiz(env, [CODE], policy="penalised_tries")
    ada.post("/quiz/quiz/start")
    _answer(ada, CODE, "code", "def scaled_scores(q, k):\n    return q @ k.transpose(-2, -1)\n")
    assert _worker(env).run_once(("cpu",)) == "done"
    page = ada.get("/quiz/quiz").get_data(as_text=True)
    assert "Not right yet. Try 1 of 3" in page and "0 of 3 test calls pass" in page
    model = load_bank().get(CODE).data["model_solution"].strip().splitlines()[-1].strip()
    assert model.startswith("return") and model not in page  # the model solution stays hidden


def test_options_cannot_be_brute_forced_for_full_credit(env, ada):
    from questions.model import load_bank
    _set_quiz(env, [SINGLE], policy="penalised_tries", penalty=1 / 3)
    ada.post("/quiz/quiz/start")
    right, wrong = _options(env, "ada@example.org", SINGLE)
    question = load_bank().get(SINGLE)
    wrong_feedback = [o["feedback"]["en"] for o in question.data["options"] if not o["correct"]]
    for number, option in enumerate(wrong[:2], start=1):
        page = _answer(ada, SINGLE, "choice", option)
        assert f"Try {number} of 3" in page
        assert not any(text in page for text in wrong_feedback)  # option feedback names the key
    page = _answer(ada, SINGLE, "choice", right)
    row = _row(env, "ada@example.org", SINGLE)
    assert row.state == "final" and row.correct and abs(row.points - 1 / 3) < 1e-6
    assert "already answered correctly" in _answer(ada, SINGLE, "choice", right)
    assert len(row.tries) == 3

    # out of tries: the third wrong one closes the question with nothing earned
    from web.models import QuizAttempt
    ada.post("/quiz/quiz/submit", data={"confirmed": "yes"})
    ada.post("/quiz/quiz/start")
    right, wrong = _options(env, "ada@example.org", SINGLE)
    for option in wrong:
        _answer(ada, SINGLE, "choice", option)
    row = _row(env, "ada@example.org", SINGLE)
    assert row.state == "final" and row.points == 0.0 and len(row.tries) == 3
    assert "no tries left" in _answer(ada, SINGLE, "choice", right)
    with db_session(env) as session:
        assert session.query(QuizAttempt).count() == 2


def test_statistics_read_the_first_answer(env, ada, bob, prof):
    _set_quiz(env, [SINGLE], policy="penalised_tries")
    for client, email in ((ada, "ada@example.org"), (bob, "bob@example.org")):
        client.post("/quiz/quiz/start")
        right, wrong = _options(env, email, SINGLE)
        if email.startswith("ada"):
            _answer(client, SINGLE, "choice", wrong[0])  # wrong first, then right
        _answer(client, SINGLE, "choice", right)
        client.post("/quiz/quiz/submit", data={"confirmed": "yes"})
    # ada retakes and is right at once: her first attempt still counts
    ada.post("/quiz/quiz/start")
    _answer(ada, SINGLE, "choice", _options(env, "ada@example.org", SINGLE)[0])
    ada.post("/quiz/quiz/submit", data={"confirmed": "yes"})
    from web.models import Assignment
    from web.services.analytics import question_stats
    from web.services.quizzes import question_bank
    with db_session(env) as session:
        (stat,) = question_stats(session, session.query(Assignment).filter_by(slug="quiz").one(),
                                 question_bank())
    assert stat["facility"] == 0.5 and stat["responses"] == 2  # not 100 %
    assert sum(d["count"] for d in stat["distribution"]) == 2
    assert "50%" in prof.get("/instructor/assignments/quiz").get_data(as_text=True)


def test_the_instructor_sets_the_policy_on_the_settings_page(env, prof):
    from web.models import Assignment
    page = prof.get("/instructor/assignments/quiz/settings").get_data(as_text=True)
    assert 'name="answer_policy"' in page and 'name="try_penalty"' in page
    assert 'name="answer_policy"' not in prof.get(
        "/instructor/assignments/sdpa/settings").get_data(as_text=True)
    form = {"title": "Quiz", "visible": "y", "late_policy": "reject", "feedback": "full",
            "question_ids": [SINGLE], "answer_policy": "penalised_tries"}
    bad = prof.post("/instructor/assignments/quiz/settings", data={**form, "try_penalty": "0"})
    assert bad.status_code == 200  # free retries would let every option be tried
    saved = prof.post("/instructor/assignments/quiz/settings", data={**form, "try_penalty": "0.25"})
    assert saved.status_code == 302
    with db_session(env) as session:
        quiz = session.query(Assignment).filter_by(slug="quiz").one()
        assert (quiz.answer_policy, quiz.try_penalty) == ("penalised_tries", 0.25)


@pytest.mark.parametrize("share, tries", [(1 / 3, 3), (0.3333, 3), (0.25, 4), (0.3, 4), (0.5, 2),
                                          (1.0, 1), (0.05, 20), (0.0, 20)])
def test_tries_offered_while_a_try_can_still_earn_points(share, tries):
    from web.models import Assignment
    from web.services import quiz_policy
    quiz = Assignment(answer_policy="penalised_tries", try_penalty=share)
    assert quiz_policy.tries_allowed(quiz) == tries
    assert quiz_policy.multiplier(quiz, tries - 1) >= 0.01  # the last try is worth something
    single = Assignment(answer_policy="single_try", try_penalty=share)
    assert quiz_policy.tries_allowed(single) == 1 and quiz_policy.multiplier(single, 1) == 0.0
