"""Quiz pages and the instructor's statistics behind them."""
from __future__ import annotations

import re
from datetime import timedelta

from pages_support import ada, bob, db_session, env, prof  # noqa: F401

NUMERIC, SINGLE, FREE = "head-dimension", "why-scale-by-sqrt-dk", "derive-score-variance"


def _user_id(env, email):
    from web.services.users import find_user
    with db_session(env) as session:
        return find_user(session, email).id


def _solution(env, email, qid):
    from questions.answers import solution
    from questions.model import load_bank
    question = load_bank().get(qid)
    return question, solution(question, _seed(env, email, qid))


def _seed(env, email, qid):
    """The student's variant, as the server draws it: keyed by the server's quiz secret."""
    from questions.variants import variant_seed
    from web.config import quiz_secret
    return variant_seed(f"user:{_user_id(env, email)}", qid, quiz_secret(env.config))


def _field(qid, name):
    return f"q-{qid}-{name}"


def test_quiz_in_russian_with_feedback_then_the_instructors_grade(env, ada, prof):
    page = ada.post("/language", data={"lang": "ru", "next": "/quiz/quiz"}, follow_redirects=True)
    text = page.get_data(as_text=True)
    assert '<html lang="ru">' in text and "Начать тест" in text  # the interface follows (Flask-Babel)
    assert ada.post("/quiz/quiz/start").status_code == 302
    page = ada.get("/quiz/quiz").get_data(as_text=True)
    assert "Размерность одной головы" in page  # the numeric question's Russian title
    with db_session(env) as session:
        from web.services.users import find_user
        assert find_user(session, "ada@example.org").locale == "ru"  # remembered

    _, sol = _solution(env, "ada@example.org", NUMERIC)
    page = ada.post(f"/quiz/quiz/questions/{NUMERIC}",
                    data={_field(NUMERIC, "number"): str(sol["value"]).replace(".", ",")},
                    follow_redirects=True).get_data(as_text=True)
    assert re.search(r'class="feedback correct"><strong>1 / 1</strong> · Верно', page)

    question, sol = _solution(env, "ada@example.org", SINGLE)
    wrong = next(o["id"] for o in question.data["options"] if not o["correct"])
    from questions.variants import token
    seed = _seed(env, "ada@example.org", SINGLE)
    page = ada.post(f"/quiz/quiz/questions/{SINGLE}",
                    data={_field(SINGLE, "choice"): token(seed, SINGLE, wrong)},
                    follow_redirects=True).get_data(as_text=True)
    assert "Неверно" in page and 'class="feedback wrong"' in page

    page = ada.post(f"/quiz/quiz/questions/{NUMERIC}", data={_field(NUMERIC, "number"): "sqrt(64)"},
                    follow_redirects=True).get_data(as_text=True)
    assert "Ответ не принят:" in page  # the refusal is in the page's language too

    essay = "Var(q·k) = d_k <img src=x onerror=alert(1)>"
    ada.post(f"/quiz/quiz/questions/{FREE}", data={_field(FREE, "text"): essay})
    response = ada.post("/quiz/quiz/submit", data={"confirmed": "yes"})
    attempt_url = response.location
    page = ada.get(attempt_url).get_data(as_text=True)
    assert "Ждёт проверки" in page and "<img src=x" not in page and "&lt;img src=x" in page
    assert "1 / " in page  # the numeric point so far

    queue = prof.get("/instructor/grading").get_data(as_text=True)
    assert "ada@example.org" in queue and "&lt;img src=x" in queue and "<img src=x" not in queue
    answer_id = int(re.search(r'action="/instructor/grading/(\d+)"', queue).group(1))
    rubric = re.findall(rf'name="a{answer_id}-rubric" type="checkbox" value="([^"]+)"', queue)
    assert len(rubric) == 4
    saved = prof.post(f"/instructor/grading/{answer_id}",
                      data={f"a{answer_id}-rubric": rubric[:2],
                            f"a{answer_id}-comment": "Derivation fine; explain saturation."},
                      follow_redirects=True).get_data(as_text=True)
    assert "Saved 2 / 4 for ada@example.org" in saved and "Nothing waits for grading" in saved

    page = ada.get(attempt_url).get_data(as_text=True)
    assert "Оценка преподавателя: 2 / 4" in page and "explain saturation" in page
    assert "Ждёт проверки" not in page
    home = ada.get("/").get_data(as_text=True)
    assert "3 / " in home  # best quiz score: 1 numeric + 2 rubric points

    stats = prof.get("/instructor/assignments/quiz").get_data(as_text=True)
    assert "Facility" in stats and "100%" in stats and "✓ " in stats
    assert attempt_url in stats  # the attempts list links to each attempt
    assert prof.get(attempt_url).status_code == 200


def test_answers_need_an_open_attempt_and_a_valid_form(env, ada):
    page = ada.post(f"/quiz/quiz/questions/{NUMERIC}", data={_field(NUMERIC, "number"): "1"},
                    follow_redirects=True).get_data(as_text=True)
    assert "no open attempt" in page
    ada.post("/quiz/quiz/start")
    page = ada.post(f"/quiz/quiz/questions/{NUMERIC}", data={}, follow_redirects=True
                    ).get_data(as_text=True)
    assert "Answer not saved: enter a number" in page
    assert ada.post("/quiz/quiz/questions/not-a-question").status_code == 404


def test_quiz_attempt_limit(env, ada):
    from web.models import Assignment
    with db_session(env) as session:
        session.query(Assignment).filter_by(slug="quiz").one().max_attempts = 1
        session.commit()
    ada.post("/quiz/quiz/start")
    ada.post("/quiz/quiz/submit", data={"confirmed": "yes"})
    page = ada.get("/quiz/quiz").get_data(as_text=True)
    assert "The quiz is closed: no attempts left." in page
    page = ada.post("/quiz/quiz/start", follow_redirects=True).get_data(as_text=True)
    assert "Cannot start the quiz: no attempts left" in page


def test_quiz_attempts_are_numbered_per_student(env, ada, bob):
    for _ in range(2):  # bob's attempts take the first global ids
        bob.post("/quiz/quiz/start")
        bob.post("/quiz/quiz/submit", data={"confirmed": "yes"})
    ada.post("/quiz/quiz/start")
    first = ada.post("/quiz/quiz/submit", data={"confirmed": "yes"}).location
    ada.post("/quiz/quiz/start")
    second = ada.post("/quiz/quiz/submit", data={"confirmed": "yes"}).location
    first_id = int(first.rsplit("/", 1)[1])
    assert first_id > 2
    page = ada.get(first).get_data(as_text=True)
    assert "<h1>Attempt 1 " in page and f"#{first_id}" not in page
    assert "<h1>Attempt 2 " in ada.get(second).get_data(as_text=True)
    listing = ada.get("/quiz/quiz").get_data(as_text=True)
    assert re.findall(r'href="/quiz/attempts/\d+">([^<]+)</a>', listing) == ["Attempt 2", "Attempt 1"]
    staff = env.app.test_client()
    from pages_support import sign_in
    sign_in(staff, "prof@example.org")
    assert "<h1>Attempt 2 " in staff.get(second).get_data(as_text=True)  # the student's number


# ---- analytics ---------------------------------------------------------------------------

def _quiz_attempts(session, assignment, outcomes):
    """One submitted attempt per entry: {question_id: fraction of its points}."""
    from web.models import QuizAnswer, QuizAttempt, utcnow
    from web.services.users import add_user
    for i, fractions in enumerate(outcomes):
        user = add_user(session, f"s{i}@example.org")
        attempt = QuizAttempt(assignment=assignment, user=user, status="submitted",
                              submitted_at=utcnow())
        for position, (qid, fraction) in enumerate(fractions.items()):
            attempt.answers.append(QuizAnswer(
                question_id=qid, position=position, seed=1, answer="1", max_points=2.0,
                points=2.0 * fraction, correct=fraction == 1.0, answered_at=utcnow()))
        attempt.score = sum(a.points for a in attempt.answers)
        attempt.max_score = sum(a.max_points for a in attempt.answers)
        session.add(attempt)
    session.flush()


def test_facility_and_discrimination(env):
    from web.models import Assignment
    from web.services.analytics import question_stats
    with db_session(env) as session:
        quiz = session.query(Assignment).filter_by(slug="quiz").one()
        quiz.question_ids = ["hard", "easy"]
        # the two strongest students get "hard" right; everyone gets "easy"
        _quiz_attempts(session, quiz, [{"hard": 1.0, "easy": 1.0}, {"hard": 1.0, "easy": 1.0},
                                       {"hard": 0.0, "easy": 1.0}, {"hard": 0.0, "easy": 1.0}])
        stats = {s["question_id"]: s for s in question_stats(session, quiz)}
    assert stats["hard"]["facility"] == 0.5 and stats["easy"]["facility"] == 1.0
    assert stats["hard"]["discrimination"] == 1.0 and stats["easy"]["discrimination"] == 0.0
    assert stats["hard"]["responses"] == 4
    outcome = {d["label"]: d["count"] for d in stats["hard"]["distribution"]}
    assert outcome == {"correct": 2, "wrong": 2}


def test_discrimination_needs_four_attempts(env):
    from web.models import Assignment
    from web.services.analytics import question_stats
    with db_session(env) as session:
        quiz = session.query(Assignment).filter_by(slug="quiz").one()
        quiz.question_ids = ["q"]
        _quiz_attempts(session, quiz, [{"q": 1.0}, {"q": 0.0}])
        (stat,) = question_stats(session, quiz)
    assert stat["facility"] == 0.5 and stat["discrimination"] is None


def test_choice_answer_distribution_counts_options(env):
    from questions.model import load_bank
    from questions.variants import token
    from web.models import QuizAnswer, utcnow
    from web.services.analytics import answer_distribution
    question = load_bank().get(SINGLE)
    ids = [o["id"] for o in question.data["options"]]
    answers = [QuizAnswer(question_id=SINGLE, seed=7, answer=token(7, SINGLE, ids[0]),
                          answered_at=utcnow()),
               QuizAnswer(question_id=SINGLE, seed=8, answer=token(8, SINGLE, ids[0]),
                          answered_at=utcnow()),
               QuizAnswer(question_id=SINGLE, seed=9, answer=ids[1], answered_at=utcnow())]
    counts = [d["count"] for d in answer_distribution(question, answers)]
    assert counts[:2] == [2, 1] and sum(counts) == 3


def test_check_failure_rates_use_each_students_latest_submission(env, ada, bob):
    from pages_support import grade_queued
    from web.models import Assignment
    from web.services.mistakes import check_failure_rates
    ada.post("/tasks/sdpa", data={"code": "a\n# SCORE=4\n"})
    ada.post("/tasks/sdpa", data={"code": "a\n# SCORE=10\n"})
    bob.post("/tasks/sdpa", data={"code": "b\n# SCORE=4\n"})
    grade_queued(env)
    with db_session(env) as session:
        rates = {r["check_id"]: r for r in check_failure_rates(
            session, session.query(Assignment).filter_by(slug="sdpa").one())}
    assert (rates["values"]["failed_latest"], rates["values"]["students"]) == (1, 2)
    assert (rates["values"]["failed_all"], rates["values"]["total_all"]) == (2, 3)
    assert rates["shape"]["latest_rate"] == 0.0
    # one group (the numbers vary per run), shown by a real message of it, not a masked template
    [group] = rates["values"]["common_mistakes"]
    assert group["count"] == 2 and group["bug"] is None
    assert "…" not in group["example"] and group["example"].startswith("max abs error ")


def test_job_stats_percentiles_and_workers(env, ada):
    from web.models import GradingJob, utcnow
    from web.services.analytics import job_stats
    for i in range(3):
        ada.post("/tasks/sdpa", data={"code": f"a = {i}\n"})
    now = utcnow()
    with db_session(env) as session:
        jobs = session.query(GradingJob).order_by(GradingJob.id).all()
        for i, job in enumerate(jobs[:2]):
            job.status, job.worker = "done", f"host:cpu{i}"
            job.queued_at = now - timedelta(seconds=100)
            job.started_at = job.queued_at + timedelta(seconds=1 + 2 * i)  # waits 1 s and 3 s
            job.finished_at = job.started_at + timedelta(seconds=10)
        session.commit()
        stats = job_stats(session, now=now)
    assert stats["counts"] == {"queued": 1, "running": 0, "done": 2, "failed": 0}
    assert stats["wait"]["p50"] == 2.0 and stats["wait"]["max"] == 3.0
    assert abs(stats["wait"]["p95"] - 2.9) < 1e-9
    assert stats["grading"]["p50"] == 10.0
    assert {w["name"] for w in stats["workers"]} == {"host:cpu0", "host:cpu1"}
    assert [j.status for j in stats["open"]] == ["queued"]


def test_answers_without_a_rubric_are_graded_with_points(env, ada, prof):
    from web.models import QuizAnswer
    ada.post("/quiz/quiz/start")
    ada.post(f"/quiz/quiz/questions/{NUMERIC}", data={_field(NUMERIC, "number"): "7"})
    ada.post("/quiz/quiz/submit", data={"confirmed": "yes"})
    with db_session(env) as session:  # an answer an instructor must look at by hand
        answer = session.query(QuizAnswer).filter_by(question_id=NUMERIC).one()
        answer.correct, answer_id = None, answer.id
        session.commit()
    queue = prof.get("/instructor/grading").get_data(as_text=True)
    assert f'name="a{answer_id}-points"' in queue and f'name="a{answer_id}-rubric"' not in queue
    page = prof.post(f"/instructor/grading/{answer_id}", follow_redirects=True).get_data(as_text=True)
    assert "Not saved: give the points (0 to 1)" in page
    page = prof.post(f"/instructor/grading/{answer_id}", data={f"a{answer_id}-points": "5"},
                     follow_redirects=True).get_data(as_text=True)
    assert "Not saved: points must be between 0 and 1" in page
    page = prof.post(f"/instructor/grading/{answer_id}", data={f"a{answer_id}-points": "1"},
                     follow_redirects=True).get_data(as_text=True)
    assert "Saved 1 / 1 for ada@example.org" in page


def test_instructor_chooses_the_quiz_questions(env, prof, ada):
    response = prof.post("/instructor/assignments/quiz/settings", data={
        "title": "Short quiz", "visible": "y", "late_policy": "reject", "feedback": "full",
        "question_ids": [NUMERIC, FREE]})
    assert response.status_code == 302
    ada.post("/quiz/quiz/start")
    page = ada.get("/quiz/quiz").get_data(as_text=True)
    assert page.count('class="question"') == 2 and "Short quiz" in page
    assert f'id="q-{NUMERIC}"' in page and f'id="q-{SINGLE}"' not in page


def test_a_matrix_a_shape_and_a_big_o_are_answered_on_the_quiz_page(env, prof, ada):
    """The typed kinds get their inputs (a grid of boxes for a matrix, one line for a shape, a
    big-O expression or a formula), are graded on the page, and the attempt shows the matrix as a grid."""
    matrix, shape, big_o = "hand-attention-output", "split-heads-shape", "self-attention-cost-big-o"
    formula = "variance-nonzero-mean-formula"
    prof.post("/instructor/assignments/quiz/settings", data={
        "title": "Typed answers", "visible": "y", "late_policy": "reject", "feedback": "full",
        "question_ids": [matrix, shape, big_o, formula]})
    ada.post("/quiz/quiz/start")
    page = ada.get("/quiz/quiz").get_data(as_text=True)
    assert 'class="matrix-grid"' in page and 'aria-label="row 2, column 1"' in page
    assert "Use the variables n, d" in page
    _, sol = _solution(env, "ada@example.org", matrix)
    cells = {_field(matrix, f"cell_{r}_{c}"): f"{x:.2f}" for r, row in enumerate(sol["matrix"])
             for c, x in enumerate(row)}
    page = ada.post(f"/quiz/quiz/questions/{matrix}", data=cells, follow_redirects=True).get_data(as_text=True)
    assert re.search(r'class="feedback correct"><strong>2 / 2</strong>', page)
    _, sol = _solution(env, "ada@example.org", shape)
    page = ada.post(f"/quiz/quiz/questions/{shape}", data={_field(shape, "expression"): str(tuple(sol["shape"]))},
                    follow_redirects=True).get_data(as_text=True)
    page = ada.post(f"/quiz/quiz/questions/{big_o}", data={_field(big_o, "expression"): "O(d n²)"},
                    follow_redirects=True).get_data(as_text=True)
    page = ada.post(f"/quiz/quiz/questions/{formula}", data={_field(formula, "expression"): "d_k + 2 d_k mu²"},
                    follow_redirects=True).get_data(as_text=True)
    assert page.count('class="feedback correct"') == 4
    attempt = ada.post("/quiz/quiz/submit", data={"confirmed": "yes"}).location
    page = ada.get(attempt).get_data(as_text=True)
    assert 'class="matrix-grid answer"' in page and "O(d n²)" in page
