"""Workers sized to the cores, woken when a job is queued; results reach waiting requests.

Every wait here has a fallback far longer than the test's own bound (POLL_SECONDS=60 for the
worker), so a pass means the wake-up worked, not that a poll happened to come round.
"""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest
from sqlalchemy import create_engine, select

from service_support import ROOT, fake_grade, make_config, wait_until
from web import create_app
from web.db import session_factory
from web.dispatch import wakeup
from web.dispatch.broker import DatabaseDispatcher, make_dispatcher
from web.dispatch.supervisor import Supervisor, worker_specs
from web.dispatch.threads import threads_per_worker
from web.dispatch.worker import GradingWorker
from web.models import User
from web.services.courses import find_assignment
from web.services.submissions import submit

# ---- threads per worker ----------------------------------------------------------------


@pytest.mark.parametrize("setting, workers, cores, expected", [
    (0, 2, 2, 1), (0, 1, 2, 2), (0, 2, 16, 8), (0, 3, 2, 1), (0, 0, 4, 4), (3, 2, 2, 3)])
def test_each_worker_gets_its_share_of_the_cores(setting, workers, cores, expected):
    assert threads_per_worker(setting, workers, cores) == expected


def test_a_negative_thread_setting_is_refused_with_its_name():
    with pytest.raises(ValueError, match="ATTN_GRADER_TORCH_THREADS=-1"):
        threads_per_worker(-1, 2)


def test_the_supervisor_starts_workers_with_their_thread_share(monkeypatch):
    launched = []

    class FakePopen:
        def __init__(self, argv, env):
            launched.append(env)

    monkeypatch.setattr("web.dispatch.supervisor.subprocess.Popen", FakePopen)
    monkeypatch.setattr("web.dispatch.threads.usable_cores", lambda: 2)
    supervisor = Supervisor({"DATABASE_URL": "sqlite://", "TORCH_THREADS": 0},
                            worker_specs(2, prefix="host"))
    for spec in supervisor.specs:
        supervisor._spawn(spec)
    assert [(e["OMP_NUM_THREADS"], e["ATTN_GRADER_TORCH_THREADS"]) for e in launched] == \
        [("1", "1"), ("1", "1")]


def test_a_worker_process_limits_torch_to_its_threads():
    code = ("from web.dispatch.threads import apply_threads; apply_threads(1); "
            "import torch; print(torch.get_num_threads())")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "1"


# ---- the wake-up datagrams ---------------------------------------------------------------


def test_a_listener_gets_what_is_sent_to_its_role_only(tmp_path):
    folder = str(tmp_path / "w")
    worker, web = wakeup.WakeListener(folder, "worker"), wakeup.WakeListener(folder, "web")
    try:
        assert wakeup.notify(folder, "worker", "job") == 1
        assert worker.wait(5) == ["job"]
        assert web.wait(0) == []
        assert wakeup.notify_submission(folder, 42) == 1
        assert web.wait(5) == ["submission 42"]
    finally:
        worker.close()
        web.close()
    assert wakeup.notify(folder, "worker", "job") == 0  # closed: nobody left to wake


def test_a_socket_left_by_a_dead_process_is_removed(tmp_path):
    folder = str(tmp_path / "w")
    listener = wakeup.WakeListener(folder, "worker")
    listener.sock.close()  # as if its process had died: the file stays, nobody reads it
    assert wakeup.notify(folder, "worker", "job") == 0
    assert not list((tmp_path / "w").iterdir())


def test_the_wake_folder_is_short_and_per_database():
    a, b = wakeup.wake_dir("sqlite:////" + "x" * 300), wakeup.wake_dir("sqlite:///other.db")
    assert a != b and len(a) < 60


def _submit(service, code="# SCORE=7\n", dispatcher=None):
    with session_factory(service.engine)() as session:
        user = session.scalar(select(User).where(User.email == "ada@example.org"))
        sub = submit(session, user, find_assignment(session, "sdpa"), code,
                     dispatcher=dispatcher, max_attempts=3)
        return sub.id


def test_a_queued_job_wakes_an_idle_polling_worker(service):
    config = dict(service.config, POLL_SECONDS=60.0)  # no re-check within the test's bound
    worker = GradingWorker(service.engine, config, grade_fn=fake_grade, name="idle")
    stop = threading.Event()
    thread = threading.Thread(target=worker.run_polling, args=(["cpu"], stop), daemon=True)
    thread.start()
    wait_until(lambda: worker.listener is not None, timeout=10, what="the worker listening")
    dispatcher = make_dispatcher(config)
    assert isinstance(dispatcher, DatabaseDispatcher)
    sub_id = _submit(service, dispatcher=dispatcher)

    def graded():
        with session_factory(service.engine)() as session:
            return session.get(__import__("web.models").models.Submission, sub_id).status == "done"

    wait_until(graded, timeout=20, what="the woken worker to grade the job")
    stop.set()
    worker.wake()
    thread.join(10)
    assert not thread.is_alive()  # the stop request woke it too


# ---- waiting for a result ----------------------------------------------------------------


def test_waiters_are_woken_by_a_notification_and_time_out_otherwise(tmp_path, monkeypatch):
    monkeypatch.setattr(wakeup, "RECHECK_SECONDS", 60.0)  # only the datagram can wake it
    folder = str(tmp_path / "w")
    waiters = wakeup.StatusWaiters(folder, capacity=2)
    state = {"done": False}
    assert waiters.wait(7, lambda: state["done"], timeout=0.2) is False
    result = []
    thread = threading.Thread(target=lambda: result.append(
        waiters.wait(7, lambda: state["done"], timeout=60)))
    thread.start()
    wait_until(lambda: waiters.waiting == 1, timeout=10, what="the request waiting")
    state["done"] = True
    wait_until(lambda: wakeup.notify_submission(folder, 7) == 1, timeout=10,
               what="the web listener bound")
    thread.join(20)
    assert result == [True] and waiters.waiting == 0 and not waiters.events


def test_status_hints_spare_the_reads_that_cannot_end_a_wait(tmp_path, monkeypatch):
    """A request waiting for a result sleeps on through a "running" wake-up (each change
    arrives twice where the Redis relay runs beside the datagrams), but a hint-less message
    and a final status are each worth one read of the database, which decides."""
    monkeypatch.setattr(wakeup, "RECHECK_SECONDS", 60.0)
    assert wakeup.submission_message(7, "done") == "submission 7 done"
    assert wakeup.submission_message(7, "bogus") == wakeup.submission_message(7) == "submission 7"
    waiters = wakeup.StatusWaiters(str(tmp_path / "w"), capacity=2)
    state = {"status": "queued", "reads": 0}

    def changed():
        state["reads"] += 1
        return state["status"] == "done"

    result = []
    thread = threading.Thread(target=lambda: result.append(waiters.wait(
        7, changed, timeout=60, wants=lambda status: status in ("done", "failed"))))
    thread.start()
    wait_until(lambda: waiters.waiting == 1 and state["reads"] == 1, timeout=10,
               what="the request waiting (one read, after registering)")

    def consumed():
        return all(not w.hints and not w.event.is_set() for w in waiters.events.get(7, ()))

    state["status"] = "running"
    waiters._deliver("submission 7 running")
    wait_until(consumed, timeout=10, what="the hint taken")
    time.sleep(0.2)
    assert state["reads"] == 1  # nothing a read could find: no read
    waiters._deliver("submission 7")  # an older sender's message, without a hint
    wait_until(lambda: state["reads"] == 2, timeout=10, what="a read for the hint-less message")
    state["status"] = "done"
    waiters._deliver("submission 7 done")
    thread.join(20)
    assert result == [True] and state["reads"] == 3 and not waiters.events


def test_a_full_house_of_waiters_answers_at_once(tmp_path):
    waiters = wakeup.StatusWaiters(str(tmp_path / "w"), capacity=0)
    assert waiters.wait(1, lambda: False, timeout=60) is False


@pytest.fixture
def api_app(service):
    app = create_app(dict(service.config, WAITING_REQUESTS=4))
    return app


def _headers(service, who="ada"):
    return {"Authorization": f"Bearer {service.people[who]['token']}"}


def test_the_api_holds_a_request_until_the_result_is_stored(service, api_app):
    client = api_app.test_client()
    accepted = client.post("/api/v1/submissions", json={"task": "sdpa", "code": "# SCORE=6\n"},
                           headers=_headers(service)).get_json()
    answer = []
    thread = threading.Thread(target=lambda: answer.append(
        client.get(accepted["url"] + "?wait=60", headers=_headers(service)).get_json()))
    thread.start()
    waiters = api_app.extensions["attn_grader"].waiters
    wait_until(lambda: waiters.waiting == 1, timeout=10, what="the request waiting")
    worker = GradingWorker(service.engine, service.config, grade_fn=fake_grade, name="w")
    assert worker.run_once(["cpu"]) == "done"
    thread.join(30)
    assert answer and answer[0]["status"] == "done" and answer[0]["score"] == 6.0


def test_the_api_answers_at_once_without_wait_and_refuses_a_bad_wait(service, api_app):
    client = api_app.test_client()
    accepted = client.post("/api/v1/submissions", json={"task": "sdpa", "code": "# SCORE=6\n"},
                           headers=_headers(service)).get_json()
    assert client.get(accepted["url"], headers=_headers(service)).get_json()["status"] == "queued"
    bad = client.get(accepted["url"] + "?wait=soon", headers=_headers(service))
    assert bad.status_code == 400 and "wait='soon'" in bad.get_json()["error"]
    other = client.get(accepted["url"] + "?wait=5", headers=_headers(service, "bob"))
    assert other.status_code == 404  # waiting never reveals another student's submission


def test_the_status_endpoint_answers_once_the_status_moves_on(service):
    from pages_support import sign_in

    app = create_app(dict(service.config, PAGES=True, WTF_CSRF_ENABLED=False))
    client = app.test_client()
    sign_in(client, "ada@example.org")
    sub_id = _submit(service, "# SCORE=5\n")
    url = f"/submissions/{sub_id}/status.json"
    assert client.get(url + "?wait=x").status_code == 400
    answer = []
    thread = threading.Thread(target=lambda: answer.append(
        client.get(url + "?wait=60&seen=queued").get_json()))
    thread.start()
    waiters = app.extensions["attn_grader"].waiters
    wait_until(lambda: waiters.waiting == 1, timeout=10, what="the page's request waiting")
    GradingWorker(service.engine, service.config, grade_fn=fake_grade, name="w").run_once(["cpu"])
    thread.join(30)
    assert answer and answer[0]["status"] in ("running", "done")  # the first change it saw
    final = client.get(url + "?wait=60&seen=running").get_json()
    assert final["finished"] is True and final["score"] == 5.0


def test_make_config_keeps_the_waiting_defaults(tmp_path):
    config = make_config(tmp_path)
    assert config["WAITING_REQUESTS"] == 8 and config["TORCH_THREADS"] == 0


def test_submit_asks_the_server_to_hold_and_pauses_only_when_it_does_not(monkeypatch):
    from grader import client

    answers = iter([{"id": 3, "url": "http://h/api/v1/submissions/3", "status": "queued"},
                    {"status": "queued"}, {"status": "running"}, {"status": "done", "id": 3}])
    asked, pauses = [], []

    def fake_request(method, url, token, body=None, timeout=30):
        asked.append((method, url))
        return next(answers)

    monkeypatch.setattr(client, "_request", fake_request)
    monkeypatch.setattr(client.time, "sleep", pauses.append)
    view = client.submit_and_wait("http://h", "tok", "sdpa", "code", timeout=600)
    assert view["status"] == "done"
    assert [url for _, url in asked[1:]] == ["http://h/api/v1/submissions/3?wait=25"] * 3
    assert len(pauses) == 2  # each early, unfinished answer (a server that did not hold it)


def test_an_idle_broker_worker_looks_for_work_often(monkeypatch, tmp_path):
    import dramatiq

    started = []

    class FakeWorker:
        def __init__(self, broker, queues, worker_threads, worker_timeout):
            self.threads, self.timeout, self.queue_prefetch = worker_threads, worker_timeout, 2

        def start(self):
            started.append((self.threads, self.timeout, self.queue_prefetch))

        def stop(self):
            pass

    monkeypatch.setattr(dramatiq, "Worker", FakeWorker)
    config = make_config(tmp_path, BROKER_URL="stub://")
    # a worker always has its database (its scores go to the LMS passback outbox): an engine
    # that is never connected here, the broker's messages being faked
    engine = create_engine(config["DATABASE_URL"])
    worker = GradingWorker(engine, config, grade_fn=fake_grade, name="broker")
    stop = threading.Event()
    stop.set()
    worker.run_dramatiq(["cpu"], stop)
    engine.dispose()
    assert started == [(1, 30, 2)]  # idle consumers wait at most 30 ms; the next job prefetched


def test_status_changes_reach_waiters_on_other_hosts_through_redis(redis_url, tmp_path,
                                                                   monkeypatch):
    url, namespace = redis_url
    monkeypatch.setattr(wakeup, "RECHECK_SECONDS", 60.0)  # only the relay can wake it
    config = {"BROKER_URL": url, "BROKER_NAMESPACE": namespace}
    waiters = wakeup.StatusWaiters(str(tmp_path / "web-host"), capacity=2,
                                   relay=wakeup.RedisRelay.for_config(config))
    state = {"done": False}
    result = []
    thread = threading.Thread(target=lambda: result.append(
        waiters.wait(9, lambda: state["done"], timeout=60)))
    thread.start()
    wait_until(lambda: waiters.waiting == 1, timeout=10, what="the request waiting")
    worker_host = wakeup.RedisRelay.for_config(config)  # its datagrams go to another folder
    state["done"] = True

    def delivered():  # published again until the subscriber, started with the wait, hears it
        wakeup.notify_submission(str(tmp_path / "worker-host"), 9, worker_host)
        thread.join(0.2)
        return not thread.is_alive()

    wait_until(delivered, timeout=20, what="the relayed wake-up (the subscriber may start late)")
    assert result == [True]


def test_only_a_redis_broker_gets_a_relay():
    assert wakeup.RedisRelay.for_config({"BROKER_URL": "stub://"}) is None
    assert wakeup.RedisRelay.for_config({}) is None
    relay = wakeup.RedisRelay.for_config({"BROKER_URL": "redis://127.0.0.1:1/0",
                                          "BROKER_NAMESPACE": "ns"})
    assert relay.channel == "ns:submission-status"
    relay.publish("submission 1")  # Redis unreachable: the waiting requests re-check; no error
