"""Who may open which page: every URL rule of the app, for anonymous visitors, students
(their own data and another student's) and instructors."""
from __future__ import annotations

import pytest

from pages_support import ada, bob, db_session, env, grade_queued, prof, sign_in  # noqa: F401

# Rules that are public on purpose (no page data): sign-in/up, static files, health, API
# (token-authenticated, tested by the API's own tests).
PUBLIC = {"auth.sign_in", "auth.sign_up", "auth.forgot_password", "auth.reset_password", "static",
          "student.pygments_stylesheet", "student.favicon", "healthz", "metrics", "observability.healthz",
          "observability.metrics",
          "quiz.visitor_language",  # a visitor's language switch: it only sets the session's language
          # LTI: the LMS's own requests (checked by state, nonce and signature) and the JWKS
          "lti.login", "lti.launch", "lti.jwks",
          # dynamic registration: the LMS opens it; a signed one-use token in the URL is the
          # authority (tests/test_lti_registration.py)
          "lti.register",
          # the student package's wheel (open source, no page data): pip cannot sign in
          "student.download"}

INSTRUCTOR_BLUEPRINTS = ("instructor.", "signup_admin.", "similarity.")


def _page_rules(app):
    return [r for r in app.url_map.iter_rules()
            if r.endpoint not in PUBLIC and not r.endpoint.startswith("api.")
            and not r.rule.startswith("/api/") and r.rule not in ("/healthz", "/metrics")]


def _seed_work(env, client_ada, client_bob):
    """A graded submission and a submitted quiz attempt for each of ada and bob."""
    from web.models import QuizAttempt, Submission, User

    for client in (client_ada, client_bob):
        assert client.post("/tasks/sdpa", data={"code": "def f():\n    return 1\n"}).status_code == 302
        client.post("/quiz/quiz/start")
        client.post("/quiz/quiz/questions/derive-score-variance",
                    data={"q-derive-score-variance-text": "a derivation"})
        client.post("/quiz/quiz/submit", data={"confirmed": "yes"})
    grade_queued(env)
    with db_session(env) as session:
        subs = {s.user.email.split("@")[0]: s.id for s in session.query(Submission)}
        attempts = {a.user.email.split("@")[0]: a.id for a in session.query(QuizAttempt)}
        answers = {a.user.email.split("@")[0]: next(x.id for x in a.answers if x.answered_at)
                   for a in session.query(QuizAttempt)}
        USER_IDS.update({u.email.split("@")[0]: u.id for u in session.query(User)})
    return subs, attempts, answers


USER_IDS: dict[str, int] = {}  # the seeded people's ids (a student's page takes one), by _seed_work


def _url(rule, owner: str, subs, attempts, answers) -> str:
    values = {"submission_id": subs[owner], "attempt_id": attempts[owner], "user_id": USER_IDS[owner],
              "answer_id": answers[owner], "slug": "quiz" if "quiz" in rule.rule else "sdpa",
              "position": 0, "plot": "weights", "question_id": "derive-score-variance",
              "invitation_id": 1, "report_id": 1, "index": 0,
              "platform_id": 1, "context_id": 1, "launch_id": "launch-1", "token_id": 1}
    return rule.build({k: values[k] for k in rule.arguments}, append_unknown=False)[1]


def _methods(rule):
    return sorted(rule.methods & {"GET", "POST"})


def test_every_page_needs_sign_in(env, ada, bob):
    subs, attempts, answers = _seed_work(env, ada, bob)
    anonymous = env.app.test_client()
    rules = _page_rules(env.app)
    assert len(rules) >= 25  # the guard covers the whole app, not a handful
    wrong = []
    for rule in rules:
        url = _url(rule, "ada", subs, attempts, answers)
        for method in _methods(rule):
            response = anonymous.open(url, method=method)
            if not (response.status_code == 302 and "/sign-in" in response.location) and \
                    response.status_code not in (401, 403):
                wrong.append(f"{method} {url} -> {response.status_code}")
    assert not wrong, "pages open to anonymous visitors:\n" + "\n".join(wrong)


def test_students_get_403_on_every_instructor_page(env, ada, bob):
    subs, attempts, answers = _seed_work(env, ada, bob)
    rules = [r for r in _page_rules(env.app)
             if r.endpoint.startswith(INSTRUCTOR_BLUEPRINTS) or r.rule.startswith("/instructor/")]
    assert len(rules) >= 12
    wrong = []
    for rule in rules:
        url = _url(rule, "ada", subs, attempts, answers)
        for method in _methods(rule):
            response = ada.open(url, method=method)
            if response.status_code != 403:
                wrong.append(f"{method} {url} -> {response.status_code}")
    assert not wrong, "instructor pages a student reached:\n" + "\n".join(wrong)


def test_students_never_see_each_others_work(env, ada, bob):
    subs, attempts, answers = _seed_work(env, ada, bob)
    # every student page that names a submission or an attempt, pointed at bob's
    rules = [r for r in _page_rules(env.app) if not r.endpoint.startswith("instructor.")
             and ({"submission_id", "attempt_id"} & set(r.arguments))]
    assert {r.endpoint for r in rules} >= {"student.submission", "student.submission_status",
                                            "student.check_plot", "quiz.attempt"}
    for rule in rules:
        url = _url(rule, "bob", subs, attempts, answers)
        assert ada.get(url).status_code == 404, url
        own = _url(rule, "ada", subs, attempts, answers)
        if rule.endpoint != "student.check_plot":  # the fake grader draws no pictures
            assert ada.get(own).status_code == 200, own
    page = ada.get(f"/submissions/{subs['ada']}").get_data(as_text=True)
    assert "bob@example.org" not in page


def test_instructors_open_every_page(env, ada, bob, prof):
    from web.models import Assignment, SimilarityReport

    subs, attempts, answers = _seed_work(env, ada, bob)
    with db_session(env) as session:  # a stored similarity report (id 1), for its side-by-side page
        sdpa = session.query(Assignment).filter_by(slug="sdpa").one()
        session.add(SimilarityReport(assignment_id=sdpa.id, status="done", pairs=[
            {"a": subs["ada"], "b": subs["bob"], "similarity_a": 1.0, "similarity_b": 1.0, "tokens": 9,
             "slices_a": [[0], [5]], "slices_b": [[0], [5]]}]))
        session.commit()
    broken = []
    for rule in _page_rules(env.app):
        # No pictures from the fake grader; content selection needs a live LMS launch
        # (tests/test_lti.py opens it).
        if "GET" not in rule.methods or rule.endpoint in ("student.check_plot", "lti.deep_link"):
            continue
        url = _url(rule, "bob", subs, attempts, answers)
        response = prof.get(url)
        if response.status_code != 200:
            broken.append(f"GET {url} -> {response.status_code}")
    assert not broken, "\n".join(broken)


def test_sign_in_is_rate_limited(env):
    client = env.app.test_client()
    codes = [sign_in(client, "ada@example.org", "wrong password").status_code for _ in range(11)]
    assert codes[:10] == [200] * 10  # the form again, with an error
    assert codes[10] == 429
    assert "Too many requests" in client.post("/sign-in", data={}).get_data(as_text=True)
    client.get("/language/ru")
    page = client.post("/sign-in", data={}).get_data(as_text=True)
    assert "Не больше 10 попыток за 60 с с вашего адреса." in page and "per 1 minute" not in page


def test_forms_need_a_csrf_token(tmp_path):
    from pages_support import make_env
    from web.db import dispose_engines

    env = make_env(tmp_path, WTF_CSRF_ENABLED=True)
    try:
        client = env.app.test_client()
        response = sign_in(client, "ada@example.org")
        assert response.status_code == 400
        assert "form expired" in response.get_data(as_text=True)
        page = client.get("/sign-in").get_data(as_text=True)
        assert 'name="csrf_token"' in page
    finally:
        dispose_engines()


@pytest.mark.parametrize("target", ["//evil.example/", "https://evil.example/x", "evil"])
def test_sign_in_never_redirects_off_site(env, target):
    client = env.app.test_client()
    response = client.post("/sign-in?next=" + target,
                           data={"email": "ada@example.org", "password": "correct horse"})
    assert response.status_code == 302
    assert response.location == "/"
