"""Structured logs with job ids, /healthz, /metrics from the database, database-error answers."""
import io
import json
import logging

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine, select

from service_support import free_port
from web import create_app
from web.db import session_factory
from web.dispatch import claim as claims
from web.services.grading import reconcile_jobs as reconcile
from web.dispatch.worker import GradingWorker
from web.models import GradingJob, User, utcnow
from web.observability import configure_logging, log_context
from web.services.courses import find_assignment
from web.services.submissions import submit


def _submit(service, code="# SCORE=10\n", task="sdpa", email="ada@example.org", **kw):
    with session_factory(service.engine)() as session:
        user = session.scalar(select(User).where(User.email == email))
        sub = submit(session, user, find_assignment(session, task), code, **kw)
        return sub.id, sub.job.id


@pytest.fixture
def json_log():
    stream = io.StringIO()
    configure_logging("INFO", fmt="json", stream=stream)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "_attn_grader", False)]:
        root.removeHandler(handler)


def test_log_lines_are_json_with_the_submission_and_job_ids(service, json_log):
    sub_id, job_id = _submit(service)
    worker = GradingWorker(service.engine, service.config, name="w-log")
    assert worker.run_once(["cpu"]) == "done"
    lines = json_log()
    accepted = [r for r in lines if r["msg"].startswith("accepted submission")]
    assert accepted and accepted[0]["submission_id"] == sub_id and accepted[0]["job_id"] == job_id
    finished = [r for r in lines if r.get("outcome") == "done"]
    assert len(finished) == 1
    record = finished[0]
    assert (record["job_id"], record["submission_id"], record["attempt"], record["worker"]) == \
        (job_id, sub_id, 1, "w-log")
    assert record["level"] == "info" and record["ts"].endswith("Z") and record["seconds"] >= 0


def test_log_context_nests_and_is_removed_afterwards(json_log):
    log = logging.getLogger("test.context")
    with log_context(job_id=1):
        with log_context(submission_id=2):
            log.info("inner")
        log.info("outer")
    log.info("after")
    inner, outer, after = json_log()
    assert (inner["job_id"], inner["submission_id"]) == (1, 2)
    assert outer["job_id"] == 1 and "submission_id" not in outer
    assert "job_id" not in after


def test_requests_get_an_id_and_an_access_log_line(service, json_log):
    client = create_app(service.config).test_client()
    token = service.people["ada"]["token"]
    r = client.get("/api/v1/tasks", headers={"Authorization": f"Bearer {token}",
                                             "X-Request-ID": "trace-42"})
    assert r.status_code == 200 and r.headers["X-Request-ID"] == "trace-42"
    access = [x for x in json_log() if x["logger"] == "web.access"]
    assert access[-1]["request_id"] == "trace-42" and access[-1]["status"] == 200
    assert access[-1]["user_id"] == service.people["ada"]["id"]
    assert client.get("/healthz").headers["X-Request-ID"]  # generated when none was sent


def test_a_rate_limited_request_has_an_id_and_an_access_log_line(service, json_log):
    client = create_app({**service.config, "API_RATE_LIMIT": "2 per minute"}).test_client()
    headers = {"Authorization": f"Bearer {service.people['ada']['token']}"}
    statuses = [client.get("/api/v1/tasks", headers=headers).status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
    refused = client.get("/api/v1/tasks", headers={**headers, "X-Request-ID": "over-7"})
    assert refused.status_code == 429 and refused.headers["X-Request-ID"] == "over-7"
    access = [x for x in json_log() if x["logger"] == "web.access"]
    assert [x["status"] for x in access] == [200, 200, 429, 429]
    assert access[-1]["request_id"] == "over-7"


def test_an_unreachable_rate_limit_store_lets_requests_through_counted_in_memory(service):
    """Redis (the limits' store at scale) down: no 500s; each process counts by itself."""
    dead = f"redis://127.0.0.1:{free_port()}/6"
    app = create_app({**service.config, "RATELIMIT_STORAGE_URI": dead,
                      "API_RATE_LIMIT": "3 per minute"})
    client = app.test_client()
    headers = {"Authorization": f"Bearer {service.people['ada']['token']}"}
    posted = [client.post("/api/v1/submissions", headers=headers,
                          json={"task": "sdpa", "code": f"# SCORE={n}\n"}).status_code
              for n in range(4)]
    assert posted == [202, 202, 202, 429]  # accepted, and the limit still holds
    assert GradingWorker(service.engine, service.config, name="w").run_once() == "done"


def test_bad_log_format_is_refused_with_the_variable_name(monkeypatch):
    monkeypatch.setenv("ATTN_GRADER_LOG_FORMAT", "xml")
    with pytest.raises(ValueError, match="ATTN_GRADER_LOG_FORMAT"):
        configure_logging()


def test_healthz_reports_database_and_broker(service):
    client = create_app(service.config).test_client()
    r = client.get("/healthz")
    assert r.status_code == 200
    assert r.get_json() == {"status": "ok", "checks": {"database": "ok",
                                                       "broker": "none (database queue)"}}


def test_healthz_is_503_when_the_database_is_down_and_degraded_without_broker(service):
    app = create_app({**service.config, "BROKER_URL": f"redis://127.0.0.1:{free_port()}/0"})
    client = app.test_client()
    body = client.get("/healthz").get_json()
    assert body["status"] == "degraded" and body["checks"]["broker"].startswith("unreachable")

    app.extensions["attn_grader"].engine = create_engine(
        f"postgresql+psycopg://nobody@127.0.0.1:{free_port()}/none")
    r = client.get("/healthz")
    assert r.status_code == 503 and r.get_json()["status"] == "down"
    assert r.get_json()["checks"]["database"].startswith("unreachable")


def test_an_unreachable_database_is_a_503_json_answer_not_a_crash(service):
    app = create_app(service.config)
    app.extensions["attn_grader"].engine = create_engine(
        f"postgresql+psycopg://nobody@127.0.0.1:{free_port()}/none")
    token = service.people["ada"]["token"]
    r = app.test_client().post("/api/v1/submissions", headers={"Authorization": f"Bearer {token}"},
                               json={"task": "sdpa", "code": "x = 1\n"})
    assert r.status_code == 503
    assert "database is unavailable" in r.get_json()["error"] and r.headers["Retry-After"]


def _metrics(client, **headers) -> dict:
    r = client.get("/metrics", headers=headers)
    assert r.status_code == 200 and r.mimetype == "text/plain"
    samples = {}
    for family in text_string_to_metric_families(r.get_data(as_text=True)):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def test_metrics_count_jobs_durations_failures_and_workers_from_the_database(service):
    with session_factory(service.engine)() as session:
        find_assignment(session, "mha").device = "cuda"
        session.commit()
    _submit(service)                               # graded by w1
    _submit(service, code="# GRADER_ERROR\n")      # grader breaks: failed after 1 attempt
    _submit(service, email="bob@example.org")      # lost host: lease expires, reconciler fails it
    _submit(service, task="mha")                   # waits on the gpu queue
    with session_factory(service.engine)() as session:
        for job in session.scalars(select(GradingJob)):
            job.max_attempts = 1
        session.commit()
    worker = GradingWorker(service.engine, service.config, name="w1")
    assert worker.run_once(["cpu"]) == "done"
    assert worker.run_once(["cpu"]) == "failed"
    lost = claims.claim_next(service.engine, "w2", lease_seconds=0.0)
    assert lost is not None
    reconcile(service.engine, now=utcnow())

    m = _metrics(create_app(service.config).test_client())
    jobs = {labels: v for (name, labels), v in m.items() if name == "attn_grader_jobs"}
    assert jobs[(("queue", "cpu"), ("status", "done"))] == 1
    assert jobs[(("queue", "cpu"), ("status", "failed"))] == 2
    assert jobs[(("queue", "gpu"), ("status", "queued"))] == 1
    failures = "attn_grader_job_failures_total"
    assert m[(failures, (("queue", "cpu"), ("reason", "grader_error")))] == 1
    assert m[(failures, (("queue", "cpu"), ("reason", "host_lost")))] == 1
    assert m[("attn_grader_job_duration_seconds_count", ())] == 1
    assert m[("attn_grader_job_duration_seconds_bucket", (("le", "+Inf"),))] == 1
    assert m[("attn_grader_queue_wait_seconds_count", ())] == 3
    assert m[("attn_grader_queue_oldest_seconds", (("queue", "gpu"),))] >= 0
    assert m[("attn_grader_queue_oldest_seconds", (("queue", "cpu"),))] == 0
    assert m[("attn_grader_workers_seen", (("queue", "cpu"),))] == 2
    assert m[("attn_grader_results_total", (("outcome", "passed"),))] == 1
    assert m[("attn_grader_submissions_total", ())] == 4
    assert m[("attn_grader_database_up", ())] == 1


def test_metrics_token_is_required_when_configured(service):
    client = create_app({**service.config, "METRICS_TOKEN": "s3cret-scrape"}).test_client()
    r = client.get("/metrics")
    assert r.status_code == 401 and r.headers["WWW-Authenticate"] == "Bearer"
    assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert _metrics(client, Authorization="Bearer s3cret-scrape")[("attn_grader_database_up", ())]


def test_an_unreachable_database_is_a_503_page_that_fits_a_phone_for_a_browser(tmp_path):
    """A page of its own (the site's layout reads the user from the database): a phone's width,
    the reason, and a retry by itself where retrying repeats nothing (GET)."""
    from pages_support import make_env, sign_in
    from web.db import dispose_engines

    env = make_env(tmp_path)
    try:
        client = env.app.test_client()
        assert sign_in(client, "ada@example.org").status_code == 302
        env.app.extensions["attn_grader"].engine = create_engine(
            f"postgresql+psycopg://nobody@127.0.0.1:{free_port()}/none")
        page = client.get("/", headers={"Accept": "text/html"})
        assert page.status_code == 503 and page.mimetype == "text/html" and page.headers["Retry-After"]
        html = page.get_data(as_text=True)
        assert 'name="viewport" content="width=device-width' in html
        assert "The database is unavailable right now" in html and 'http-equiv="refresh"' in html
        sent = client.post("/sign-in", data={"email": "ada@example.org", "password": "x"},
                           headers={"Accept": "text/html"})
        assert sent.status_code == 503 and 'http-equiv="refresh"' not in sent.get_data(as_text=True)
        assert "Back button" in sent.get_data(as_text=True)
        # the language is chosen without the database: the browser's, here
        russian = client.get("/", headers={"Accept": "text/html", "Accept-Language": "ru"})
        assert '<html lang="ru">' in russian.get_data(as_text=True)
        assert "База данных сейчас недоступна" in russian.get_data(as_text=True)
        assert "через 30 секунд." in russian.get_data(as_text=True)
    finally:
        dispose_engines()
