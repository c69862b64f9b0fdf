"""Faults during a deadline rush: each test ends with every accepted submission graded or
failed with a reason, and none graded twice.

Servers that a test kills are its own (tests/fault_support.py): the shared PostgreSQL and
Redis on 5432/6379 are never touched. Workers are real processes (``python -m
web.dispatch.worker``) with the fake grader from service_support, except the hung-sandbox
test, which grades with the real grader and sandbox.
"""
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import requests
from sqlalchemy import create_engine, event, func, select, text

from fault_support import PrivatePostgres, PrivateRedis, ReconcilerThread, stop_processes
from service_support import (ROOT, env_for, fake_grade, free_port, grade_log_lines, make_config,
                             migrate, seed_people, spawn_worker, wait_until)
from web import create_app
from web.db import dispose_engines, get_engine, session_factory
from web.dispatch import claim as claims
from web.dispatch.broker import make_dispatcher
from web.dispatch.worker import GradingWorker
from web.models import GradingJob, Result, Submission, User, utcnow
from web.observability import DB_DOWN_RETRY_SECONDS, STORE_FULL_RETRY_SECONDS

pytestmark = pytest.mark.slow
CORRECT_SDPA = ROOT / "grader" / "tasks" / "sdpa" / "corpus" / "correct" / "einsum.py"


# ---- fixtures ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def redis_server():
    server = PrivateRedis()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def pg_server():
    server = PrivatePostgres()
    try:
        server.init()
        server.start()
        yield server
    finally:
        dispose_engines()
        server.cleanup()


class Stack:
    """One test's database, config, people, API client and grade log."""

    def __init__(self, tmp_path, url, people=None, **overrides):
        self.tmp_path, self.url = tmp_path, url
        self.config = make_config(tmp_path, url, LEASE_SECONDS=2.0, QUEUED_STALE_SECONDS=2.0,
                                  **overrides)
        if people is None:
            migrate(url)
        self.engine = get_engine(url)
        self.people = people or seed_people(self.engine)
        self.app = create_app(self.config)
        self.client = self.app.test_client()
        self.log = tmp_path / "grades.log"
        self.workers: list[subprocess.Popen] = []

    def post(self, code: str, who: str = "ada"):
        return self.client.post("/api/v1/submissions", json={"task": "sdpa", "code": code},
                                headers={"Authorization": f"Bearer {self.people[who]['token']}"})

    def submit_many(self, n: int, tag: str, sleep: float = 0.5) -> list[int]:
        ids = []
        for i in range(n):
            r = self.post(f"# ID={tag}{i}\n# SLEEP={sleep}\n# SCORE=9\n",
                          who="ada" if i % 2 else "bob")
            assert r.status_code == 202, r.get_json()
            ids.append(r.get_json()["id"])
        return ids

    def backlog(self, n: int, tag: str, sleep: float) -> list[int]:
        """``n`` submissions committed at once, then one message each (a deadline's queue)."""
        from web.services.courses import find_assignment

        with session_factory(self.engine)() as session:
            user = session.get(User, self.people["bob"]["id"])
            assignment = find_assignment(session, "sdpa")
            jobs = [GradingJob(submission=Submission(
                assignment=assignment, user=user, task_id="sdpa", status="queued",
                code=f"# ID={tag}{i}\n# SLEEP={sleep}\n", code_sha256="0" * 64),
                queue="cpu", status="queued", notified_at=utcnow()) for i in range(n)]
            session.add_all(jobs)
            session.commit()
            make_dispatcher(self.config).notify([(job.id, "cpu") for job in jobs])
            return [job.submission_id for job in jobs]

    def worker(self, name: str, **env) -> subprocess.Popen:
        proc = spawn_worker(self.config, name, ATTN_TEST_GRADE_LOG=self.log, **env)
        self.workers.append(proc)
        return proc

    def states(self, ids) -> dict:
        with session_factory(self.engine)() as session:
            rows = session.execute(
                select(Submission.id, Submission.status, Submission.error, GradingJob.attempts,
                       func.count(Result.id))
                .join(GradingJob, GradingJob.submission_id == Submission.id)
                .outerjoin(Result, Result.submission_id == Submission.id)
                .where(Submission.id.in_(ids))
                .group_by(Submission.id, Submission.status, Submission.error,
                          GradingJob.attempts)).all()
        return {r[0]: {"status": r[1], "error": r[2], "attempts": r[3], "results": r[4]}
                for r in rows}

    def all_settled(self, ids) -> bool:
        return all(s["status"] in ("done", "failed") for s in self.states(ids).values())

    def assert_each_graded_or_failed_once(self, ids) -> dict:
        states = self.states(ids)
        assert sorted(states) == sorted(ids), "an accepted submission is missing"
        for sub_id, s in states.items():
            assert s["status"] in ("done", "failed"), (sub_id, s)
            if s["status"] == "done":
                assert s["results"] == 1, f"submission {sub_id} graded {s['results']} times"
            else:
                assert s["error"], f"submission {sub_id} failed without a reason"
        return states

    def started_by(self, proc) -> bool:
        return any(line[:2] == ["start", str(proc.pid)] for line in grade_log_lines(self.log))

    def close(self):
        stop_processes(*self.workers)
        dispose_engines()


@pytest.fixture
def pg_stack(pg_server, redis_server, tmp_path):
    """A fresh database on the private PostgreSQL; jobs travel through the private Redis, which
    also holds the rate limits (as in a deployment)."""
    name = f"faults_{uuid.uuid4().hex[:8]}"
    admin = create_engine(pg_server.url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    url = pg_server.url.rsplit("/", 1)[0] + "/" + name
    stack = Stack(tmp_path, url, BROKER_URL=redis_server.url,
                  BROKER_NAMESPACE=f"faults_{uuid.uuid4().hex[:8]}",
                  RATELIMIT_STORAGE_URI=redis_server.url.rsplit("/", 1)[0] + "/1")
    yield stack
    stack.close()


@pytest.fixture
def sqlite_stack(tmp_path, _seeded_sqlite):
    template, people = _seeded_sqlite  # migrated and seeded once per session
    shutil.copy(template, tmp_path / "grader.db")
    stack = Stack(tmp_path, f"sqlite:///{tmp_path / 'grader.db'}", people=people)
    yield stack
    stack.close()


# ---- worker killed mid-job -------------------------------------------------------------------

class Counting:
    """A host's reconciler dispatcher that records the job ids it sends, then sends them."""

    def __init__(self, config):
        self.dispatcher, self.sent = make_dispatcher(config), []

    def notify(self, jobs):
        self.sent.extend(job_id for job_id, _ in jobs)
        self.dispatcher.notify(jobs)


def test_a_sigkilled_workers_job_is_regraded_within_its_lease_ahead_of_200_queued(pg_stack):
    """The lost job keeps its place: the next claim after its lease takes it, whatever the
    backlog, and the reconcilers of two hosts ring for it once between them (its re-sent
    message used to join the back of the queue, 187 s behind a deep one)."""
    lease = pg_stack.config["LEASE_SECONDS"]
    workers = {proc.pid: proc for proc in (pg_stack.worker("w1"), pg_stack.worker("w2"))}
    lost = pg_stack.post("# ID=k0\n# SLEEP=30\n").get_json()["id"]  # the oldest: taken first
    backlog = pg_stack.backlog(200, "q", sleep=0.25)  # each with its own message

    def started(tag):
        return {int(line[1]) for line in grade_log_lines(pg_stack.log)
                if line[0] == "start" and line[2].startswith(tag)}

    hosts = [Counting(pg_stack.config), Counting(pg_stack.config)]
    with ReconcilerThread(pg_stack.engine, hosts[0]), ReconcilerThread(pg_stack.engine, hosts[1]):
        wait_until(lambda: started("k0") and started("q") - started("k0"), timeout=60,
                   what="one worker to hold the job and the other to work on the backlog")
        doomed = workers.pop(started("k0").pop())
        killed_at = utcnow()
        doomed.kill()
        doomed.wait(10)
        wait_until(lambda: pg_stack.states([lost])[lost]["attempts"] == 2, timeout=lease + 30,
                   what="the killed job to be claimed again")
    (rescuer,) = workers.values()
    rescuer.kill()  # done with it (it would grade the backlog to the end)
    sent = hosts[0].sent + hosts[1].sent
    with session_factory(pg_stack.engine)() as session:
        job = session.scalar(select(GradingJob).where(GradingJob.submission_id == lost))
        waiting = session.scalar(select(func.count()).select_from(GradingJob)
                                 .where(GradingJob.status == "queued"))
        attempts = dict(session.execute(select(GradingJob.id, GradingJob.attempts)
                                        .where(GradingJob.id.in_(sent))).all())
    assert job.status == "running" and job.worker in ("w1", "w2")
    assert (job.started_at - killed_at).total_seconds() <= lease + 15
    assert waiting > 100  # it did not wait for the backlog
    # At most one doorbell per lost attempt between the two hosts (a loaded machine may stall
    # a worker past a 2 s lease now and then), and none for jobs that merely wait: the
    # reconcilers used to re-send the whole backlog every QUEUED_STALE_SECONDS.
    assert all(sent.count(job_id) <= attempts[job_id] for job_id in set(sent)), sent
    assert len(set(sent)) < len(backlog) // 20, sent


# ---- web killed between commit and notify ----------------------------------------------------

WEB_DIES_AFTER_COMMIT = """
import os, signal, sys
from werkzeug.serving import make_server
from web import create_app

app = create_app()
def die_before_publishing(jobs):  # the row is committed; the process dies before notifying
    os.kill(os.getpid(), signal.SIGKILL)
app.extensions["attn_grader"].dispatcher.notify = die_before_publishing
make_server("127.0.0.1", int(sys.argv[1]), app, threaded=True).serve_forever()
"""


def test_sigkill_of_the_web_process_between_commit_and_notify(pg_stack, redis_server):
    import redis

    port = free_port()
    web = subprocess.Popen([sys.executable, "-c", WEB_DIES_AFTER_COMMIT, str(port)],
                           env=env_for(pg_stack.config), cwd=ROOT)
    try:
        wait_until(lambda: _answers(port), timeout=60, what="the web process to listen")
        token = pg_stack.people["ada"]["token"]
        with pytest.raises(requests.ConnectionError):  # the client never hears back
            requests.post(f"http://127.0.0.1:{port}/api/v1/submissions", timeout=30,
                          headers={"Authorization": f"Bearer {token}"},
                          json={"task": "sdpa", "code": "# ID=w0\n# SCORE=8\n"})
        assert web.wait(10) == -signal.SIGKILL
    finally:
        stop_processes(web)

    with session_factory(pg_stack.engine)() as session:
        ids = list(session.scalars(select(Submission.id)))
        assert len(ids) == 1 and session.get(Submission, ids[0]).job.status == "queued"
    namespace = pg_stack.config["BROKER_NAMESPACE"]
    assert not redis.Redis.from_url(redis_server.url).keys(f"{namespace}*")  # never published

    pg_stack.worker("after-crash")
    with ReconcilerThread(pg_stack.engine, make_dispatcher(pg_stack.config)):
        wait_until(lambda: pg_stack.all_settled(ids), timeout=60, what="the orphan to be graded")
    assert pg_stack.assert_each_graded_or_failed_once(ids)[ids[0]]["status"] == "done"


def _answers(port: int) -> bool:
    try:
        return requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
    except requests.ConnectionError:
        return False


# ---- Redis restarted with jobs in flight -------------------------------------------------------

def test_redis_restart_with_jobs_in_flight_loses_no_submission(pg_stack, redis_server):
    """Redis is the broker and the rate limits' store: while it is down, submissions are
    accepted and graded (idle workers look at the database); after it, messages flow again."""
    ids = pg_stack.submit_many(8, "r", sleep=0.6)
    first = pg_stack.worker("r1")
    pg_stack.worker("r2")
    with ReconcilerThread(pg_stack.engine, make_dispatcher(pg_stack.config)):
        wait_until(lambda: pg_stack.started_by(first), timeout=60, what="grading to start")
        redis_server.kill()  # every queued message is gone (no persistence)
        during = [pg_stack.post(f"# ID=rd{i}\n# SCORE=7\n") for i in range(2)]
        assert [r.status_code for r in during] == [202, 202]  # accepted, notify failed
        ids += [r.get_json()["id"] for r in during]
        wait_until(lambda: pg_stack.all_settled(ids), timeout=120,
                   what="every job to be graded while Redis is down")
        redis_server.start()
        after = pg_stack.post("# ID=ra\n# SCORE=8\n")
        assert after.status_code == 202
        ids.append(after.get_json()["id"])
        wait_until(lambda: pg_stack.all_settled(ids), timeout=60, what="the job sent after it")
    states = pg_stack.assert_each_graded_or_failed_once(ids)
    assert all(s["status"] == "done" for s in states.values())


# ---- PostgreSQL restarted ------------------------------------------------------------------------

def test_postgres_restart_mid_grading_and_submissions_during_the_outage(pg_stack, pg_server):
    ids = pg_stack.submit_many(6, "p", sleep=0.8)
    first = pg_stack.worker("p1")
    pg_stack.worker("p2")
    with ReconcilerThread(pg_stack.engine, make_dispatcher(pg_stack.config)):
        wait_until(lambda: pg_stack.started_by(first), timeout=60, what="grading to start")
        pg_server.stop("immediate")  # every connection dropped, like a crash
        try:
            down = pg_stack.post("# ID=pdown\n")
            assert down.status_code == 503  # said clearly; nothing was accepted
            assert "database is unavailable" in down.get_json()["error"]
            time.sleep(1.0)
        finally:
            pg_server.start()
        wait_until(lambda: pg_stack.all_settled(ids), timeout=120, what="every job to settle")
    states = pg_stack.assert_each_graded_or_failed_once(ids)
    assert all(s["status"] == "done" for s in states.values())
    with session_factory(pg_stack.engine)() as session:  # the refused one left no trace
        assert session.scalar(select(func.count(Submission.id))) == len(ids)


def test_a_postgres_restart_in_the_middle_of_a_request_answers_503_not_500(pg_stack, pg_server):
    """The database goes away after the request loaded its user: the answer is the documented
    503, and its access line is written (reading the user's id from the rolled-back session
    once turned it into a 500)."""
    import io
    import json
    import logging

    from web.observability import configure_logging

    engine = pg_stack.app.extensions["attn_grader"].engine

    def restart_now(conn, cursor, statement, *_):
        if statement.startswith("INSERT INTO submissions") and pg_server.started:
            pg_server.stop("immediate")  # like a crash, between the user's look-up and the write

    stream = io.StringIO()
    configure_logging("INFO", fmt="json", stream=stream)
    event.listen(engine, "before_cursor_execute", restart_now)
    try:
        r = pg_stack.post("# ID=mid\n")
    finally:
        event.remove(engine, "before_cursor_execute", restart_now)
        pg_server.start()
        root = logging.getLogger()
        for handler in [h for h in root.handlers if getattr(h, "_attn_grader", False)]:
            root.removeHandler(handler)
    assert r.status_code == 503 and r.headers["Retry-After"]
    assert "database is unavailable" in r.get_json()["error"]
    access = [x for x in map(json.loads, stream.getvalue().splitlines())
              if x["logger"] == "web.access"]
    assert [(x["status"], x["user_id"], x["request_id"]) for x in access] == \
        [(503, pg_stack.people["ada"]["id"], r.get_json()["request_id"])]
    assert pg_stack.post("# ID=after\n").status_code == 202  # and it is back


# ---- full disk on the submission store -----------------------------------------------------------

def _limit_pages(engine, extra_pages: int | None):
    """Cap the SQLite file at its current size + ``extra_pages`` (None: lift the cap)."""
    engine.dispose()
    with engine.connect() as conn:
        pages = conn.exec_driver_sql("PRAGMA page_count").scalar()
    limit = 1_073_741_823 if extra_pages is None else pages + extra_pages

    def cap(dbapi_conn, _record):
        dbapi_conn.execute(f"PRAGMA max_page_count={limit}")

    for old in getattr(engine, "_test_caps", []):
        event.remove(engine, "connect", old)
    engine._test_caps = [cap]
    event.listen(engine, "connect", cap)
    engine.dispose()


def test_a_full_submission_store_answers_503_and_keeps_nothing_half_written(sqlite_stack):
    stack = sqlite_stack
    engine = stack.app.extensions["attn_grader"].engine
    assert engine is stack.engine
    _limit_pages(engine, 4)  # 16 KB left
    big = "# ID=big\n" + "x = 1  # padding\n" * 3500  # about 60 KB
    r = stack.post(big)
    # The documented answer: 503 with a retry hint (never 500, nor a 507 no client retries),
    # longer than a restarting database's. Flask-Limiter rewrites the header as whole seconds
    # from its own clock, so 300 may read 299.
    assert r.status_code == 503
    assert DB_DOWN_RETRY_SECONDS < int(r.headers["Retry-After"]) <= STORE_FULL_RETRY_SECONDS
    assert "submission store is full" in r.get_json()["error"]
    small = stack.post("# ID=small\n# SCORE=6\n")
    assert small.status_code == 202  # what fits is still accepted
    with session_factory(engine)() as session:
        assert session.scalar(select(func.count(Submission.id))) == 1
        assert session.scalar(select(func.count(GradingJob.id))) == 1

    # The disk fills while a worker grades: its result cannot be written ...
    claim = claims.claim_next(engine, "w-full", lease_seconds=1.0)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE filler (b BLOB)")
    for size in (2000, 500, 100, 20):  # SQLite rolls back a transaction that hit "full"
        with pytest.raises(Exception, match="full"):
            while True:
                with engine.begin() as conn:
                    conn.exec_driver_sql(f"INSERT INTO filler VALUES (zeroblob({size}))")
    def grade_with_weights(code, task, **kw):  # real reports carry attention weights
        report = fake_grade(code, task, **kw)
        report["checks"][0]["details"]["weights_submission"] = [[0.125] * 64] * 64
        return report

    worker = GradingWorker(engine, stack.config, grade_fn=grade_with_weights, name="w-full")
    with pytest.raises(Exception, match="full"):
        worker.process(claim)
    sub_id = small.get_json()["id"]
    assert stack.states([sub_id])[sub_id] == {"status": "running", "error": None,
                                              "attempts": 1, "results": 0}
    # ... and once space is freed the job is graded on its next attempt, once.
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE filler")
    _limit_pages(engine, None)
    time.sleep(1.1)  # the lease of the failed attempt runs out
    assert worker.run_once(["cpu"]) == "done"
    state = stack.assert_each_graded_or_failed_once([sub_id])[sub_id]
    assert (state["status"], state["attempts"]) == ("done", 2)
    assert stack.post(big).status_code == 202


def test_postgres_disk_full_is_recognised_by_its_sqlstate():
    from sqlalchemy.exc import OperationalError

    from web.observability import is_disk_full

    class DiskFull(Exception):
        sqlstate = "53100"

    assert is_disk_full(OperationalError("INSERT ...", {}, DiskFull("could not extend file")))
    assert not is_disk_full(OperationalError("SELECT 1", {}, Exception("connection refused")))


# ---- hung sandbox child ------------------------------------------------------------------------

HUNG = '''import signal

def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # ignores polite requests to stop
    while True:
        pass
'''


def _descendants(pid: int) -> set[int]:
    children = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, set()).add(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def test_a_hung_sandbox_child_is_graded_as_a_timeout_and_the_worker_goes_on(sqlite_stack):
    pytest.importorskip("grader.grading")
    stack = sqlite_stack
    hung = stack.post(HUNG).get_json()["id"]
    good = stack.post(CORRECT_SDPA.read_text()).get_json()["id"]
    worker = stack.worker("sandboxed", ATTN_GRADER_GRADE_FUNCTION="grader.grading:grade_source",
                          ATTN_GRADER_SANDBOX="auto", ATTN_GRADER_SANDBOX_CALL_SECONDS="1",
                          ATTN_GRADER_SANDBOX_WALL_SECONDS="4", ATTN_GRADER_LEASE_SECONDS="10")
    seen: set[int] = set()

    def settled():
        seen.update(_descendants(worker.pid))
        return stack.all_settled([hung, good])

    wait_until(settled, timeout=180, interval=0.2, what="both submissions to be graded")
    states = stack.assert_each_graded_or_failed_once([hung, good])
    assert states[hung]["status"] == "done" and states[good]["status"] == "done"
    with session_factory(stack.engine)() as session:
        hung_sub, good_sub = session.get(Submission, hung), session.get(Submission, good)
        assert hung_sub.score < hung_sub.max_score
        messages = [c.message for c in hung_sub.result.checks]
        assert any("did not finish in time" in m for m in messages), messages
        assert good_sub.score == good_sub.max_score  # the same worker carried on normally
    stop_processes(worker)
    wait_until(lambda: not any(Path(f"/proc/{p}").exists() and _state(p) != "Z" for p in seen),
               timeout=20, what="the sandbox children to be gone with their worker")


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"


# ---- a grading run that never returns ----------------------------------------------------------

def test_a_grading_run_that_never_returns_is_given_up_and_its_worker_restarted(sqlite_stack,
                                                                               monkeypatch):
    """The sandbox bounds student code; this is the backstop if grading itself wedges."""
    from web.dispatch.supervisor import Supervisor, worker_specs
    from web.dispatch.worker import EXIT_STUCK
    from web.housekeeping import host_round

    stack = sqlite_stack
    stuck = stack.post("# ID=wedged\n# SLEEP=1000\n").get_json()["id"]
    normal = stack.post("# ID=fine\n# SCORE=9\n").get_json()["id"]
    monkeypatch.setenv("PYTHONPATH", env_for(stack.config)["PYTHONPATH"])
    monkeypatch.setenv("ATTN_TEST_GRADE_LOG", str(stack.log))
    config = {**stack.config, "MAX_GRADE_SECONDS": 1.5, "QUEUED_STALE_SECONDS": 1.0}
    supervisor = Supervisor(config, worker_specs(1, prefix="wedge"), housekeeping=host_round)
    exits = []
    original = supervisor._spawn

    def spawn_and_watch(spec):  # record how each worker process ended
        for proc in supervisor.procs.values():
            if proc.poll() is not None:
                exits.append(proc.returncode)
        return original(spec)

    supervisor._spawn = spawn_and_watch
    supervisor.start()
    try:
        wait_until(lambda: stack.all_settled([stuck, normal]), timeout=120, interval=0.2,
                   what="the wedged job to be given up and the other graded")
    finally:
        supervisor.stop()
    states = stack.assert_each_graded_or_failed_once([stuck, normal])
    assert states[normal]["status"] == "done"
    assert states[stuck]["status"] == "failed" and states[stuck]["results"] == 0
    assert "grading host lost" in states[stuck]["error"]
    assert states[stuck]["attempts"] == stack.config["MAX_ATTEMPTS"]
    assert exits.count(EXIT_STUCK) >= stack.config["MAX_ATTEMPTS"] - 1  # restarted each time
