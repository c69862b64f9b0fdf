"""The JSON API (/api/v1) with an in-process worker and a fake grader."""
import csv
import io
from datetime import timedelta

import pytest

from service_support import fake_grade
from web import create_app
from web.db import session_factory
from web.dispatch.worker import GradingWorker
from web.models import utcnow
from web.services.courses import find_assignment


@pytest.fixture
def api(service):
    app = create_app(service.config)
    client = app.test_client()
    worker = GradingWorker(service.engine, service.config, grade_fn=fake_grade, name="test")

    def headers(who):
        return {"Authorization": f"Bearer {service.people[who]['token']}"}

    def post(who, **json):
        return client.post("/api/v1/submissions", json=json, headers=headers(who))

    def get(who, url):
        return client.get(url, headers=headers(who))

    return type("Api", (), dict(client=client, worker=worker, headers=staticmethod(headers),
                                post=staticmethod(post), get=staticmethod(get), app=app,
                                service=service))


def _set(service, slug, **fields):
    with session_factory(service.engine)() as session:
        assignment = find_assignment(session, slug)
        for name, value in fields.items():
            setattr(assignment, name, value)
        session.commit()


def test_submit_json_then_poll_until_graded(api):
    r = api.post("ada", task="sdpa", code="def f():\n    pass  # SCORE=7\n")
    assert r.status_code == 202
    body = r.get_json()
    assert body["status"] == "queued" and body["url"].endswith(f"/api/v1/submissions/{body['public_id']}")
    assert r.headers["Location"] == body["url"]
    assert api.get("ada", body["url"]).get_json()["status"] == "queued"
    assert api.worker.run_once() == "done"
    view = api.get("ada", body["url"]).get_json()
    assert {k: view[k] for k in ("id", "task", "status", "score", "max_score", "error")} == \
        {"id": body["id"], "task": "sdpa", "status": "done", "score": 7.0, "max_score": 10.0,
         "error": None}
    assert [c["id"] for c in view["checks"]] == ["shape", "values"]
    assert set(view["checks"][1]) == {"id", "passed", "points", "max_points", "message", "details"}
    timings = view["timings"]
    assert timings["queued_at"] <= timings["started_at"] <= timings["finished_at"]
    assert timings["attempts"] == 1 and view["grader_version"] == "fake-1.0"


def test_submit_a_file_as_multipart(api):
    data = {"task": "mha", "file": (io.BytesIO(b"# SCORE=10\nx = 1\n"), "mine.py")}
    r = api.client.post("/api/v1/submissions", data=data, headers=api.headers("bob"),
                        content_type="multipart/form-data")
    assert r.status_code == 202
    api.worker.run_once()
    view = api.get("bob", r.get_json()["url"]).get_json()
    assert (view["task"], view["score"], view["passed"]) == ("mha", 10.0, True)


@pytest.mark.parametrize("payload, status, message", [
    ({"task": "nope", "code": "x = 1"}, 404, "unknown task 'nope'; known tasks: sdpa, mha"),
    ({"task": "sdpa", "code": "  \n"}, 400, "the file is empty"),
    ({"task": "sdpa"}, 400, "missing 'code'"),
    ({"code": "x = 1"}, 400, "missing 'task'"),
    ({"task": "sdpa", "code": 5}, 400, "'code' must be a string"),
    ({"task": "sdpa", "code": "x = '\ud800'\n"}, 400, "not UTF-8"),  # JSON can carry a lone surrogate
    ({"task": "sdpa", "code": "x" * (64 * 1024 + 1)}, 413, "the limit is 65536 bytes"),
    ({"task": "quiz", "code": "x = 1"}, 400, "is a quiz"),
])
def test_bad_submissions_get_a_clear_error(api, payload, status, message):
    r = api.post("ada", **payload)
    assert r.status_code == status
    assert message in r.get_json()["error"]


def test_non_utf8_files_and_huge_requests_are_refused(api):
    data = {"task": "sdpa", "file": (io.BytesIO(b"x = '\xff\xfe'\n"), "latin.py")}
    r = api.client.post("/api/v1/submissions", data=data, headers=api.headers("ada"),
                        content_type="multipart/form-data")
    assert r.status_code == 400 and "not UTF-8" in r.get_json()["error"]
    huge = {"task": "sdpa", "file": (io.BytesIO(b"#" * (1024 * 1024)), "big.py")}
    r = api.client.post("/api/v1/submissions", data=huge, headers=api.headers("ada"),
                        content_type="multipart/form-data")
    assert r.status_code == 413 and "65536 bytes" in r.get_json()["error"]


def test_tokens_are_required_and_checked(api):
    r = api.client.post("/api/v1/submissions", json={"task": "sdpa", "code": "x = 1"})
    assert r.status_code == 401 and "Authorization: Bearer" in r.get_json()["error"]
    r = api.client.get("/api/v1/submissions/1", headers={"Authorization": "Bearer agt_forged"})
    assert r.status_code == 401 and r.headers["WWW-Authenticate"] == "Bearer"


def test_students_see_only_their_own_submissions(api):
    url = api.post("ada", task="sdpa", code="# SCORE=5\n").get_json()["url"]
    assert api.get("bob", url).status_code == 404
    assert api.get("prof", url).status_code == 200  # instructors see every submission
    assert api.get("ada", url.rsplit("/", 1)[0] + "/99999").status_code == 404
    mine = api.get("bob", "/api/v1/submissions").get_json()["submissions"]
    assert mine == []
    assert len(api.get("ada", "/api/v1/submissions?task=sdpa").get_json()["submissions"]) == 1


def test_deadline_passed_is_refused_unless_late_work_is_accepted(api):
    _set(api.service, "sdpa", deadline=utcnow() - timedelta(hours=1))
    r = api.post("ada", task="sdpa", code="x = 1")
    assert r.status_code == 403 and "deadline for sdpa passed at" in r.get_json()["error"]
    _set(api.service, "sdpa", late_policy="accept")
    r = api.post("ada", task="sdpa", code="x = 1")
    assert r.status_code == 202
    api.worker.run_once()
    assert api.get("ada", r.get_json()["url"]).get_json()["late"] is True


def test_rate_limited_submissions_say_when_to_retry(api):
    _set(api.service, "sdpa", rate_limit_count=2, rate_limit_seconds=600)
    assert [api.post("ada", task="sdpa", code="x = 1").status_code for _ in range(2)] == [202, 202]
    r = api.post("ada", task="sdpa", code="x = 1")
    assert r.status_code == 429  # said in minutes, as a person would
    assert "at most 2 submissions per 10 min for sdpa; try again in 10 min" in r.get_json()["error"]
    assert 590 <= int(r.headers["Retry-After"]) <= 600
    assert api.post("bob", task="sdpa", code="x = 1").status_code == 202  # per student


def test_attempt_limits_are_enforced(api):
    _set(api.service, "mha", max_attempts=1)
    assert api.post("ada", task="mha", code="x = 1").status_code == 202
    r = api.post("ada", task="mha", code="x = 1")
    assert r.status_code == 403 and "no attempts left: 1 of 1" in r.get_json()["error"]
    tasks = {t["task"]: t for t in api.get("ada", "/api/v1/tasks").get_json()["tasks"]}
    assert tasks["mha"]["attempts_used"] == 1 and tasks["mha"]["max_attempts"] == 1


def test_api_requests_are_rate_limited_per_token(service):
    app = create_app({**service.config, "API_RATE_LIMIT": "3 per minute"})
    client = app.test_client()
    headers = {"Authorization": f"Bearer {service.people['ada']['token']}"}
    codes = [client.get("/api/v1/tasks", headers=headers).status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    r = client.get("/api/v1/tasks", headers=headers)
    assert r.get_json()["error"] == "rate limited: at most 3 requests per 60 s with this token"
    headers["Accept-Language"] = "ru"  # a client that asks for Russian (the CLI's --lang does not)
    assert "не больше 3 запросов за 60 с" in client.get("/api/v1/tasks", headers=headers).get_json()["error"]
    assert int(r.headers["Retry-After"]) > 0
    other = {"Authorization": f"Bearer {service.people['bob']['token']}"}
    assert client.get("/api/v1/tasks", headers=other).status_code == 200


def test_hidden_feedback_shows_the_score_only(api):
    _set(api.service, "sdpa", feedback="score")
    url = api.post("ada", task="sdpa", code="# SCORE=6\n").get_json()["url"]
    api.worker.run_once()
    view = api.get("ada", url).get_json()
    assert (view["score"], view["checks"], view["feedback"]) == (6.0, [], "hidden")
    assert len(api.get("prof", url).get_json()["checks"]) == 2


def test_scores_are_for_instructors_as_json_and_csv(api):
    for code in ("# SCORE=4\n", "# SCORE=9\n", "# SCORE=6\n"):
        api.post("ada", task="sdpa", code=code)
    while api.worker.run_once():
        pass
    r = api.get("ada", "/api/v1/scores")
    assert r.status_code == 403 and "only instructors" in r.get_json()["error"]
    rows = {(row["email"], row["assignment"]): row
            for row in api.get("prof", "/api/v1/scores").get_json()["scores"]}
    ada = rows[("ada@example.org", "sdpa")]
    assert (ada["best_score"], ada["max_score"], ada["attempts"]) == (9.0, 10.0, 3)
    assert ada["last_submitted_at"].endswith("Z")
    assert rows[("bob@example.org", "sdpa")]["attempts"] == 0
    assert ("prof@example.org", "sdpa") not in rows
    for url in ("/api/v1/scores.csv", "/api/v1/scores?format=csv"):
        r = api.get("prof", url)
        assert r.mimetype == "text/csv"
        table = list(csv.DictReader(io.StringIO(r.get_data(as_text=True))))
        ada_row = next(t for t in table if (t["email"], t["assignment"]) ==
                       ("ada@example.org", "sdpa"))
        assert (ada_row["best_score"], ada_row["max_score"], ada_row["attempts"]) == \
            ("9.0", "10.0", "3")


def test_a_file_without_the_tasks_function_is_refused_before_it_counts(service):
    # The grader's rule (the service grades with grader.grading:grade_source, not the fake grader)
    app = create_app({**service.config, "GRADE_FUNCTION": "grader.grading:grade_source"})
    client = app.test_client()
    headers = {"Authorization": f"Bearer {service.people['ada']['token']}"}
    sdpa = "import torch\n\ndef scaled_dot_product_attention(query, key, value, attn_mask=None):\n    return query\n"
    r = client.post("/api/v1/submissions", json={"task": "mha", "code": sdpa, "filename": "sdpa.py"},
                    headers=headers)
    assert r.status_code == 422, r.get_json()
    error = r.get_json()["error"]
    assert error.startswith("sdpa.py does not define multi_head_attention(), the function task mha grades; "
                            "nothing was submitted and no attempt was counted")
    assert "it defines scaled_dot_product_attention(), the function of task sdpa" in error
    assert client.get("/api/v1/submissions?task=mha", headers=headers).get_json()["submissions"] == []
    # what may define it is graded: a helper bound by import, and a file that does not parse
    # (its syntax error is the feedback)
    for code in ("from helpers import mha as multi_head_attention\n", "def multi_head_attention(x:\n"):
        r = client.post("/api/v1/submissions", json={"task": "mha", "code": code}, headers=headers)
        assert r.status_code == 202, r.get_json()
