"""Claiming, leases, fencing and the reconciler, on SQLite with a fake grader."""
from datetime import timedelta

import pytest

from sqlalchemy import select

from service_support import fake_grade
from web.db import session_factory
from web.dispatch import claim as claims
from web.services.grading import record_job_failure, record_job_result
from web.models import HOST_LOST
from web.services.grading import reconcile_jobs as reconcile
from web.dispatch.worker import GradingWorker
from web.models import GradingJob, User, utcnow
from web.services.courses import find_assignment
from web.services.submissions import submit


class RecordingDispatcher:
    def __init__(self):
        self.sent = []

    def notify(self, jobs):
        self.sent.extend(jobs)


def _submit(service, code="# SCORE=7\n", email="ada@example.org", task="sdpa", dispatcher=None,
            now=None):
    with session_factory(service.engine)() as session:
        user = session.scalar(select(User).where(User.email == email))
        sub = submit(session, user, find_assignment(session, task), code, dispatcher=dispatcher,
                     max_attempts=service.config["MAX_ATTEMPTS"], now=now)
        return sub.id, sub.job.id


def _job(service, job_id):
    """The job, its submission and results, loaded whole (usable after the session)."""
    with session_factory(service.engine)() as session:
        job = session.get(GradingJob, job_id)
        results = list(job.submission.results)
        for result in results:
            _ = list(result.checks)
        return job, job.submission, results


def test_submit_commits_the_job_before_notifying(service):
    seen = []

    class Checking:
        def notify(self, jobs):  # the row must already be visible to another connection
            for job_id, queue in jobs:
                seen.append((_job(service, job_id)[0].status, queue))

    _submit(service, dispatcher=Checking())
    assert seen == [("queued", "cpu")]


def test_a_failed_notification_does_not_lose_the_submission(service):
    class Broken:
        def notify(self, jobs):
            raise ConnectionError("broker down")

    sub_id, job_id = _submit(service, dispatcher=Broken())
    assert _job(service, job_id)[0].status == "queued"


def test_claims_take_jobs_oldest_first_and_once(service):
    first = _submit(service)[1]
    second = _submit(service, email="bob@example.org")[1]
    a = claims.claim_next(service.engine, "w1")
    b = claims.claim_next(service.engine, "w2")
    assert (a.job_id, a.attempt, b.job_id, b.attempt) == (first, 1, second, 1)
    assert claims.claim_next(service.engine, "w3") is None  # both held under live leases
    job, sub, _ = _job(service, first)
    assert (job.status, job.worker, sub.status) == ("running", "w1", "running")
    assert a.code == "# SCORE=7\n" and a.task_id == "sdpa"


def test_a_job_claimed_by_id_is_taken_once_and_again_after_its_lease(service):
    first = _submit(service)[1]
    second = _submit(service, email="bob@example.org")[1]
    got = claims.claim_job(service.engine, second, "w1", lease_seconds=30)
    assert (got.job_id, got.attempt) == (second, 1)  # the younger job, by its id
    assert claims.claim_job(service.engine, second, "w2") is None  # held under a live lease
    later = utcnow() + timedelta(seconds=31)
    again = claims.claim_job(service.engine, second, "w2", now=later)
    assert (again.job_id, again.attempt, again.worker) == (second, 2, "w2")
    assert claims.claim_next(service.engine, "w3").job_id == first


def test_gpu_jobs_wait_for_a_gpu_worker(service):
    with session_factory(service.engine)() as session:
        find_assignment(session, "mha").device = "cuda"
        session.commit()
    _, job_id = _submit(service, task="mha")
    assert claims.claim_next(service.engine, "cpu-worker", queues=("cpu",)) is None
    got = claims.claim_next(service.engine, "gpu-worker", queues=("gpu",))
    assert (got.job_id, got.queue) == (job_id, "gpu")


def test_an_expired_lease_lets_another_worker_claim_with_a_new_attempt(service):
    _, job_id = _submit(service)
    lease = service.config["LEASE_SECONDS"]
    first = claims.claim_next(service.engine, "w1", lease_seconds=lease)
    assert claims.claim_next(service.engine, "w2", lease_seconds=lease) is None
    later = utcnow() + timedelta(seconds=lease + 1)
    second = claims.claim_next(service.engine, "w2", lease_seconds=lease, now=later)
    assert (second.job_id, second.attempt) == (job_id, 2)
    assert first.attempt == 1


def test_renewing_keeps_the_lease_and_fails_once_superseded(service):
    _submit(service)
    first = claims.claim_next(service.engine, "w1", lease_seconds=2)
    soon = utcnow() + timedelta(seconds=1.5)
    assert claims.renew_lease(service.engine, first, 2, now=soon)
    # renewed at t+1.5 for 2 s: not claimable at t+3 ...
    assert claims.claim_next(service.engine, "w2", lease_seconds=2,
                             now=utcnow() + timedelta(seconds=3)) is None
    # ... but at t+4 it is, and the first worker can no longer renew
    second = claims.claim_next(service.engine, "w2", lease_seconds=2,
                               now=utcnow() + timedelta(seconds=4))
    assert second.attempt == 2
    assert not claims.renew_lease(service.engine, first, 2)


def test_a_stale_attempt_cannot_overwrite_the_newer_result(service):
    _, job_id = _submit(service)
    stale = claims.claim_next(service.engine, "w1", lease_seconds=1)
    current = claims.claim_next(service.engine, "w2", lease_seconds=1,
                                now=utcnow() + timedelta(seconds=5))
    assert claims.finish(service.engine, current, fake_grade("# SCORE=9\n", "sdpa"),
                         record_job_result)
    assert not claims.finish(service.engine, stale, fake_grade("# SCORE=1\n", "sdpa"), record_job_result)
    assert claims.release(service.engine, stale, "late error", record_job_failure) is None
    job, sub, results = _job(service, job_id)
    assert (job.status, job.attempts, sub.score) == ("done", 2, 9.0)
    assert [(r.job_attempt, r.score) for r in results] == [(2, 9.0)]
    # the same attempt cannot store a second result either
    assert not claims.finish(service.engine, current, fake_grade("# SCORE=3\n", "sdpa"), record_job_result)


def test_results_keep_every_check_and_the_whole_report(service):
    sub_id, job_id = _submit(service, code="# SCORE=0\n")
    worker = GradingWorker(service.engine, service.config, grade_fn=fake_grade, name="w")
    assert worker.run_once() == "done"
    job, sub, results = _job(service, job_id)
    (result,) = results
    assert [(c.check_id, c.points, c.max_points) for c in result.checks] == \
        [("shape", 0.0, 4.0), ("values", 0.0, 6.0)]
    assert result.checks[1].details == {"max_abs_error": "nan"}  # strict JSON for PostgreSQL
    assert result.grader_version == sub.grader_version == "fake-1.0"
    assert result.report["timings"] == {"total": 0.01} and result.worker == "w"
    assert job.started_at <= job.finished_at and job.queued_at <= job.started_at


def test_a_student_crash_is_a_result_not_a_retry(service):
    def crashing_program(code, task, **kw):
        report = fake_grade("# SCORE=0\n", task, **kw)
        report["error"] = {"kind": "memory", "message": "the program ran out of memory (2 GiB)"}
        return report

    _, job_id = _submit(service)
    worker = GradingWorker(service.engine, service.config, grade_fn=crashing_program)
    assert worker.run_once() == "done"
    job, sub, results = _job(service, job_id)
    assert (job.status, job.attempts, sub.status, sub.score) == ("done", 1, "done", 0.0)
    assert sub.error == "memory: the program ran out of memory (2 GiB)"
    assert worker.run_once() is None


def test_a_grader_failure_is_retried_then_reported(service):
    _, job_id = _submit(service, code="# GRADER_ERROR\n")
    worker = GradingWorker(service.engine, service.config, grade_fn=fake_grade)
    outcomes = [worker.run_once() for _ in range(service.config["MAX_ATTEMPTS"] + 1)]
    assert outcomes == ["queued", "queued", "failed", None]
    job, sub, results = _job(service, job_id)
    assert (job.status, job.attempts, results) == ("failed", 3, [])
    assert sub.status == "failed" and "grader machinery broke" in sub.error


def test_reconciler_fails_jobs_whose_host_was_lost_too_often(service):
    _, job_id = _submit(service)
    now = utcnow()
    for attempt in range(1, 4):
        now += timedelta(seconds=10)
        got = claims.claim_next(service.engine, f"w{attempt}", lease_seconds=2, now=now)
        assert got.attempt == attempt
    assert claims.claim_next(service.engine, "w4", now=now + timedelta(seconds=10)) is None
    dispatcher = RecordingDispatcher()
    assert reconcile(service.engine, dispatcher, now=now + timedelta(seconds=1)).failed == []
    report = reconcile(service.engine, dispatcher, now=now + timedelta(seconds=10))
    assert report.failed == [job_id] and dispatcher.sent == []
    job, sub, _ = _job(service, job_id)
    assert job.status == sub.status == "failed"
    assert HOST_LOST in job.error and HOST_LOST in sub.error


def test_a_lost_job_is_claimed_first_and_rung_for_once_a_long_queue_never(service):
    dispatcher = RecordingDispatcher()
    now = utcnow()
    _, lost = _submit(service, now=now - timedelta(seconds=90))
    _, waiting = _submit(service, now=now - timedelta(seconds=60))  # a long queue, nothing lost
    _, fresh = _submit(service, email="bob@example.org", now=now)
    first = claims.claim_next(service.engine, "w1", lease_seconds=2,
                              now=now - timedelta(seconds=89))
    assert first.job_id == lost  # its worker dies: the lease runs out at -87 s
    report = reconcile(service.engine, dispatcher, queued_stale_seconds=30, now=now)
    assert report.renotified == [lost] and dispatcher.sent == [(lost, "cpu")]
    # rung once, not by every host's reconciler nor at every run
    assert reconcile(service.engine, dispatcher, now=now + timedelta(seconds=1)).renotified == []
    # the next claim, whatever message woke it, takes the lost job ahead of the queue
    again = claims.claim_next(service.engine, "w2", lease_seconds=2,
                              now=now + timedelta(seconds=2))
    assert (again.job_id, again.attempt) == (lost, 2)
    assert [claims.claim_next(service.engine, "w3", now=now + timedelta(seconds=3)).job_id
            for _ in range(2)] == [waiting, fresh]

    class Down:
        def notify(self, jobs):
            raise ConnectionError("broker down")

    # attempt 2 is lost too: a send that fails leaves no mark, so the next run rings
    with pytest.raises(ConnectionError):
        reconcile(service.engine, Down(), now=now + timedelta(seconds=10))
    report = reconcile(service.engine, dispatcher, now=now + timedelta(seconds=11))
    assert report.renotified == [lost] and dispatcher.sent == [(lost, "cpu")] * 2


def test_a_slow_worker_still_delivers_after_the_reconciler_gave_up(service):
    _, job_id = _submit(service)
    with session_factory(service.engine)() as session:
        session.get(GradingJob, job_id).max_attempts = 1
        session.commit()
    slow = claims.claim_next(service.engine, "slow", lease_seconds=1)
    assert reconcile(service.engine, now=utcnow() + timedelta(seconds=5)).failed == [job_id]
    assert claims.finish(service.engine, slow, fake_grade("# SCORE=8\n", "sdpa"), record_job_result)
    job, sub, results = _job(service, job_id)
    assert (job.status, sub.status, sub.score, sub.error) == ("done", "done", 8.0, None)


def test_the_worker_renews_its_lease_while_grading(service):
    config = {**service.config, "LEASE_SECONDS": 1.2}  # renewed every 0.4 s
    _, job_id = _submit(service, code="# SLEEP=2.5\n")
    worker = GradingWorker(service.engine, config, grade_fn=fake_grade, name="slow")
    import threading

    thread = threading.Thread(target=worker.run_once)
    thread.start()
    try:
        from service_support import wait_until

        wait_until(lambda: _job(service, job_id)[0].status == "running", what="claim")
        import time

        time.sleep(1.6)  # past the first lease: only renewals keep the job
        assert claims.claim_next(service.engine, "thief", lease_seconds=1.2) is None
    finally:
        thread.join()
    job, _, results = _job(service, job_id)
    assert (job.status, job.attempts, len(results)) == ("done", 1, 1)


def test_late_submissions_get_the_assignments_penalty(service):
    with session_factory(service.engine)() as session:
        assignment = find_assignment(session, "sdpa")
        assignment.deadline = utcnow() - timedelta(days=1)
        assignment.late_policy, assignment.late_penalty = "penalty", 0.25
        session.commit()
    _, job_id = _submit(service, code="# SCORE=8\n")
    GradingWorker(service.engine, service.config, grade_fn=fake_grade).run_once()
    job, sub, results = _job(service, job_id)
    assert (sub.late, sub.score, results[0].score) == (True, 6.0, 8.0)


def test_the_broker_carries_only_job_ids_and_leaves_retries_and_limits_to_the_job():
    from dramatiq import Message

    from web.dispatch.broker import QUEUES, DramatiqDispatcher, actor_name, declare_actors, make_broker

    broker = make_broker("stub://")
    DramatiqDispatcher(broker).notify([(5, "gpu"), (6, "cpu")])  # the sender declares no actor
    assert not broker.actors
    sent = {queue: Message.decode(broker.queues[queue].get_nowait()) for queue in QUEUES}
    assert [(m.actor_name, list(m.args)) for m in sent.values()] == \
        [("grade_job_cpu", [6]), ("grade_job_gpu", [5])]
    handled = []

    def handle(job_id, queue):
        handled.append((job_id, queue))
        return "done"

    declare_actors(broker, handle, max_grade_seconds=900.0)  # the worker's side
    for queue in QUEUES:
        actor = broker.get_actor(actor_name(queue))
        assert actor.queue_name == queue and actor.options["max_retries"] == 0
        assert actor.options["time_limit"] > 900_000  # the worker's own limit comes first
        assert actor.fn(7) is None  # Dramatiq logs a warning for any value an actor returns
    assert handled == [(7, "cpu"), (7, "gpu")]


def test_a_worker_consumes_only_its_queues_not_dramatiqs_unused_delay_queues(redis_url):
    import dramatiq

    from web.dispatch.broker import declare_actors, make_broker

    broker = make_broker(*redis_url)
    declare_actors(broker, lambda job_id, queue: None, max_grade_seconds=900.0)  # as run_dramatiq
    worker = dramatiq.Worker(broker, queues={"cpu"}, worker_threads=1, worker_timeout=50)
    worker.start()
    try:  # a "cpu.DQ" consumer would fetch from Redis as often as the real one, for nothing
        assert set(worker.consumers) == {"cpu"}
    finally:
        worker.stop()
        broker.close()


def test_a_worker_warms_up_on_each_device_without_taking_a_job(service):
    from reference_impl import attention

    _, job_id = _submit(service)
    calls = []

    def recording_grade(code, task, **kw):
        calls.append((code, task, kw["device"], kw["sandbox"]))
        return fake_grade("# SCORE=10\n", task, **kw)

    worker = GradingWorker(service.engine, service.config, grade_fn=recording_grade)
    worker.warm_up(["cpu", "gpu", "cpu"])
    reference = open(attention.__file__, encoding="utf-8").read()
    assert calls == [(reference, "sdpa", "cpu", service.config["SANDBOX"]),
                     (reference, "sdpa", "cuda", service.config["SANDBOX"])]
    job, sub, results = _job(service, job_id)
    assert (job.status, job.attempts, sub.status, results) == ("queued", 0, "queued", [])
    assert worker.run_once() == "done"  # the warm-up's report was not stored anywhere
    assert len(_job(service, job_id)[2]) == 1


def test_a_failed_warm_up_leaves_the_worker_ready_to_claim(service):
    _, job_id = _submit(service)
    failing = iter([RuntimeError("fork server did not start")])

    def grade(code, task, **kw):
        for exc in failing:
            raise exc
        return fake_grade(code, task, **kw)

    worker = GradingWorker(service.engine, service.config, grade_fn=grade)
    worker.warm_up(["cpu"])  # logged, not raised
    assert worker.run_once() == "done"
    assert _job(service, job_id)[0].status == "done"


def test_serve_workers_get_the_sandbox_prewarm_setting(monkeypatch):
    import os

    from web.config import load_config
    from web.dispatch import worker as worker_module
    from web.dispatch.supervisor import Supervisor, worker_specs

    assert load_config(environ={})["SANDBOX_PREWARM"] is True  # on unless an operator says no
    spawned = []
    monkeypatch.setattr("subprocess.Popen", lambda argv, env: spawned.append(env))
    config = load_config({"SANDBOX_PREWARM": False}, environ={})
    Supervisor(config, worker_specs(1))._spawn(worker_specs(1)[0])
    assert load_config(environ=spawned[0])["SANDBOX_PREWARM"] is False
    from grader.sandbox import pool

    was = pool._cpu_prewarm.is_set()
    try:
        worker_module.apply_sandbox_prewarm(False)
        assert not pool._cpu_prewarm.is_set()
        worker_module.apply_sandbox_prewarm(True)
        assert pool._cpu_prewarm.is_set()  # what grader/sandbox/pool.py's backend reads
    finally:
        pool.prewarm_cpu(was)


def test_the_pick_reads_only_unfinished_jobs_however_long_the_history(service):
    """The claim's pick must not walk the finished jobs (it walked the primary key past all of
    them: 35 ms a pick at 100,000; benchmarks/claim_pick.py times it)."""
    from sqlalchemy import insert

    from web.models import Submission

    _, queued = _submit(service)
    with session_factory(service.engine)() as session:
        first = session.get(GradingJob, queued).submission
        row = {"assignment_id": first.assignment_id, "user_id": first.user_id, "task_id": "sdpa",
               "code": "x = 1\n", "code_sha256": "0" * 64, "filename": "s.py",
               "created_at": utcnow(), "late": False, "status": "done"}
    ids = range(queued + 1, queued + 2001)
    with service.engine.begin() as conn:  # a course's history: 2,000 finished jobs
        conn.execute(insert(Submission), [{**row, "id": i} for i in ids])
        conn.execute(insert(GradingJob), [
            {"id": i, "submission_id": i, "queue": "cpu", "status": "done", "attempts": 1,
             "max_attempts": 3, "queued_at": utcnow(), "finished_at": utcnow()} for i in ids])
    with service.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("ANALYZE")
    pick = claims.next_job(("cpu",), utcnow())
    sql = str(pick.compile(service.engine, compile_kwargs={"literal_binds": True}))
    explain = "EXPLAIN QUERY PLAN " if service.backend == "sqlite" else "EXPLAIN "
    with service.engine.connect() as conn:
        plan = " ".join(str(r[-1]) for r in conn.exec_driver_sql(explain + sql))
        assert conn.execute(pick).scalar() == queued
    if service.backend == "sqlite":  # it uses a partial index only for the verbatim clause
        assert "USING INDEX ix_grading_jobs_pending" in plan, plan
    else:  # PostgreSQL's planner may sort the few unfinished rows another index finds
        assert "pk_grading_jobs" not in plan and "Seq Scan" not in plan, plan


def test_a_claim_or_store_waits_out_an_unreachable_database_but_not_a_full_disk(monkeypatch):
    from sqlalchemy.exc import OperationalError

    from web.dispatch import worker as worker_module

    monkeypatch.setattr(worker_module, "RETRY_PAUSES", (0.01,))
    down = OperationalError("SELECT 1", {}, Exception("the database system is shutting down"))
    answers = iter([down, down, "claimed"])

    def flaky():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert worker_module.while_unreachable("claim", flaky, budget=5) == "claimed"

    class DiskFull(Exception):
        sqlstate = "53100"

    calls = []

    def full():
        calls.append(1)
        raise OperationalError("INSERT ...", {}, DiskFull("could not extend file"))

    with pytest.raises(OperationalError):
        worker_module.while_unreachable("store", full, budget=5)
    assert calls == [1]  # a full disk is not waited out: the job's lease expires, it is retried
    with pytest.raises(OperationalError):  # nor an outage longer than the budget
        worker_module.while_unreachable("claim", lambda: (_ for _ in ()).throw(down), budget=0.05)


def test_job_statuses_are_constrained_values(service):
    """Statuses are ``JobStatus`` members, and the database refuses any other word, on the job
    and on the submission that mirrors it."""
    from sqlalchemy import text
    from sqlalchemy.exc import IntegrityError

    from web.models import JOB_STATUSES, JobStatus

    assert JOB_STATUSES == ("queued", "running", "done", "failed") and JobStatus.DONE == "done"
    _submit(service, "# SCORE=5\n")
    with pytest.raises(IntegrityError, match="ck_grading_jobs_status|CHECK constraint"):
        with service.engine.begin() as conn:
            conn.execute(text("UPDATE grading_jobs SET status = 'finished'"))
    with pytest.raises(IntegrityError, match="ck_submissions_status|CHECK constraint"):
        with service.engine.begin() as conn:
            conn.execute(text("UPDATE submissions SET status = 'graded'"))
    with service.engine.begin() as conn:
        conn.execute(text("UPDATE grading_jobs SET status = :s"), {"s": JobStatus.DONE})
        conn.execute(text("UPDATE submissions SET status = :s"), {"s": JobStatus.DONE})
