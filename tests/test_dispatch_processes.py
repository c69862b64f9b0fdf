"""Grading across real processes: a worker SIGKILLed mid-job, and Dramatiq delivery."""
import os
import signal

import dramatiq
import pytest
from sqlalchemy import func, select

from service_support import fake_grade, grade_log_lines, spawn_worker, wait_until
from web import create_app
from web.db import session_factory
from web.dispatch.broker import declare_actors
from web.dispatch.worker import GradingWorker
from web.models import GradingJob, Result


def _job_state(engine, job_id):
    with session_factory(engine)() as session:
        job = session.get(GradingJob, job_id)
        results = session.scalar(select(func.count(Result.id))
                                 .where(Result.submission_id == job.submission_id))
        return job.status, job.attempts, job.worker, results


def test_a_sigkilled_worker_job_is_graded_once_by_another_worker(service):
    log = service.tmp_path / "grades.log"
    app = create_app(service.config)
    token = service.people["ada"]["token"]
    r = app.test_client().post("/api/v1/submissions", headers={"Authorization": f"Bearer {token}"},
                               json={"task": "sdpa", "code": "# ID=k1\n# SLEEP=3\n# SCORE=8\n"})
    job_id = r.get_json()["id"]  # one job per submission, created together

    first = spawn_worker(service.config, "doomed", ATTN_TEST_GRADE_LOG=log)
    second = None
    try:
        wait_until(lambda: ["start", str(first.pid), "k1"] in grade_log_lines(log), timeout=60,
                   what="the first worker to start grading")
        assert _job_state(service.engine, job_id)[:3] == ("running", 1, "doomed")
        os.kill(first.pid, signal.SIGKILL)  # mid-grade: no chance to clean up
        first.wait(10)
        assert _job_state(service.engine, job_id)[0] == "running"  # the row still says so

        second = spawn_worker(service.config, "rescuer", ATTN_TEST_GRADE_LOG=log)
        wait_until(lambda: _job_state(service.engine, job_id)[0] == "done", timeout=60,
                   what="the second worker to finish the job")
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(10)
    status, attempts, worker, results = _job_state(service.engine, job_id)
    assert (status, attempts, worker, results) == ("done", 2, "rescuer", 1)
    lines = grade_log_lines(log)
    assert [line[0] for line in lines] == ["start", "start", "end"]
    assert lines[-1] == ["end", str(second.pid), "k1"]  # graded to the end once, by the rescuer


@pytest.fixture
def stub_service(service):
    # a namespace of its own: a fresh StubBroker, on which this test's worker declares the actors
    config = {**service.config, "BROKER_URL": "stub://", "BROKER_NAMESPACE": service.tmp_path.name}
    app = create_app(config)
    dispatcher = app.extensions["attn_grader"].dispatcher
    dispatcher.broker.flush_all()
    grading = GradingWorker(service.engine, config, grade_fn=fake_grade, name="dramatiq-test")
    declare_actors(dispatcher.broker, grading.handle_message,  # as run_dramatiq does
                   grading.max_grade_seconds)
    yield app, dispatcher.broker, service


def test_dramatiq_delivers_job_ids_and_duplicates_are_harmless(stub_service):
    app, broker, service = stub_service
    headers = {"Authorization": f"Bearer {service.people['bob']['token']}"}
    client = app.test_client()
    ids = [client.post("/api/v1/submissions", headers=headers,
                       json={"task": "sdpa", "code": f"# SCORE={n}\n"}).get_json()["id"]
           for n in (3, 5)]
    assert broker.queues["cpu"].qsize() == 2  # only the ids travel
    worker = dramatiq.Worker(broker, queues={"cpu"}, worker_threads=1, worker_timeout=100)
    worker.start()
    try:
        broker.join("cpu", timeout=20_000)
        assert [_job_state(service.engine, i)[:2] for i in ids] == [("done", 1), ("done", 1)]
        # a re-delivered message (reconciler, broker restart) finds the job done: no-op
        app.extensions["attn_grader"].dispatcher.notify([(ids[0], "cpu")])
        broker.join("cpu", timeout=20_000)
    finally:
        worker.stop()
    assert _job_state(service.engine, ids[0]) == ("done", 1, "dramatiq-test", 1)
    scores = [client.get(f"/api/v1/submissions/{i}", headers=headers).get_json()["score"]
              for i in ids]
    assert scores == [3.0, 5.0]


def test_a_message_claims_the_longest_waiting_job_and_an_idle_worker_finds_unsent_ones(
        stub_service):
    import threading

    from web.services.courses import find_assignment
    from web.services.submissions import submit
    from web.models import User

    app, broker, service = stub_service
    with session_factory(service.engine)() as session:  # its message is lost: none was sent
        ada = session.scalar(select(User).where(User.email == "ada@example.org"))
        unsent = submit(session, ada, find_assignment(session, "sdpa"), "# SCORE=4\n").job.id
    sent = app.test_client().post(
        "/api/v1/submissions", json={"task": "sdpa", "code": "# SCORE=6\n"},
        headers={"Authorization": f"Bearer {service.people['bob']['token']}"}).get_json()["id"]
    grading = GradingWorker(service.engine, service.config, grade_fn=fake_grade, name="bell")
    # the one message rings the queue's doorbell: the job that waited longest is graded
    assert grading.handle_message(sent, "cpu") == "done"
    assert [_job_state(service.engine, j)[0] for j in (unsent, sent)] == ["done", "queued"]
    # no message is left for the other one; the idle worker finds it in the database
    stop = threading.Event()
    look = threading.Thread(target=grading.look_when_idle, args=(["cpu"], stop))
    look.start()
    try:
        wait_until(lambda: _job_state(service.engine, sent)[0] == "done", timeout=20,
                   what="the idle worker to look at the database")
    finally:
        stop.set()
        look.join(10)
    assert _job_state(service.engine, sent) == ("done", 1, "bell", 1)


def test_workers_pin_one_gpu_each_and_leave_when_their_supervisor_dies(service):
    import subprocess
    import sys

    from service_support import ROOT, env_for
    from web.dispatch.supervisor import worker_specs

    specs = worker_specs(2, ["0", "1"], prefix="host")
    assert [(s.name, s.queues, s.env["CUDA_VISIBLE_DEVICES"]) for s in specs] == [
        ("host:cpu0", "cpu", ""), ("host:cpu1", "cpu", ""),
        ("host:gpu0", "gpu", "0"), ("host:gpu1", "gpu", "1")]
    # without a prefix: the host and this command's pid, so two commands on one host differ
    assert worker_specs(1)[0].name == f"{os.uname().nodename}:{os.getpid()}:cpu0"

    # A supervisor (here: a shell) that dies by SIGKILL; its worker notices and exits.
    shell = subprocess.Popen(
        ["bash", "-c", f"{sys.executable} -m web.dispatch.worker --name orphan "
                       "--parent-pid $$ & echo $!; wait"],
        env=env_for(service.config), cwd=ROOT, stdout=subprocess.PIPE, text=True)
    worker_pid = int(shell.stdout.readline())
    os.kill(shell.pid, signal.SIGKILL)
    shell.wait(10)

    def gone():
        try:
            os.kill(worker_pid, 0)
        except ProcessLookupError:
            return True
        with open(f"/proc/{worker_pid}/stat") as fh:  # exited but not yet reaped
            return fh.read().split()[2] == "Z"

    wait_until(gone, timeout=60, what="the orphaned worker to exit")
