"""Scale-out mode: job ids through Dramatiq on the Redis at 127.0.0.1, `attn-grader worker`."""
import os
import signal
import subprocess
import sys

import pytest
from sqlalchemy import func, select

from service_support import ROOT, env_for, grade_log_lines, wait_until
from web import create_app
from web.db import session_factory
from web.models import GradingJob, Result

pytestmark = [pytest.mark.integration,
              pytest.mark.parametrize("service", ["sqlite"], indirect=True)]


@pytest.fixture
def scaled(request, service, redis_url):
    url, namespace = redis_url
    config = {**service.config, "BROKER_URL": url, "BROKER_NAMESPACE": namespace,
              "RECONCILE_SECONDS": 0.5, **getattr(request, "param", {})}
    app = create_app(config)
    log = service.tmp_path / "grades.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "grader.cli", "worker", "--queues", "cpu", "--processes", "2"],
        env=env_for(config, ATTN_TEST_GRADE_LOG=log), cwd=ROOT, start_new_session=True)
    yield app, service, log
    os.killpg(proc.pid, signal.SIGTERM)
    # The supervisor gives its workers 30 s to finish before SIGKILL (Supervisor.stop): wait past that.
    proc.wait(30 + 15)


def _jobs(engine):
    with session_factory(engine)() as session:
        jobs = session.execute(select(GradingJob.id, GradingJob.status, GradingJob.attempts)
                               .order_by(GradingJob.id)).all()
        results = dict(session.execute(select(Result.submission_id, func.count(Result.id))
                                       .group_by(Result.submission_id)).all())
        return jobs, results


def _post(app, service, code, who="ada"):
    headers = {"Authorization": f"Bearer {service.people[who]['token']}"}
    r = app.test_client().post("/api/v1/submissions", headers=headers,
                               json={"task": "sdpa", "code": code})
    assert r.status_code == 202, r.get_json()
    return r.get_json()["id"]


# A job whose lease runs out is taken by the next claim, so a 2 s lease (the tests' default)
# lets a worker stalled for 2 s on a loaded machine lose its job to the other one: attempts
# would read 2 (and the result still once). Here no job is meant to be lost.
@pytest.mark.parametrize("scaled", [{"LEASE_SECONDS": 30.0}], indirect=True)
def test_workers_on_the_broker_grade_every_submission_once(scaled):
    app, service, log = scaled
    ids = [_post(app, service, f"# ID=r{n}\n# SCORE={n}\n", "ada" if n % 2 else "bob")
           for n in range(8)]
    wait_until(lambda: all(s == "done" for _, s, _ in _jobs(service.engine)[0]), timeout=90,
               what="8 jobs graded through Redis")
    jobs, results = _jobs(service.engine)
    assert [a for _, _, a in jobs] == [1] * 8 and results == {i: 1 for i in ids}
    assert sorted(line[2] for line in grade_log_lines(log) if line[0] == "end") == \
        sorted(f"r{n}" for n in range(8))


def test_a_killed_broker_worker_job_is_recovered_by_the_reconciler(scaled):
    app, service, log = scaled
    job_id = _post(app, service, "# ID=kill\n# SLEEP=3\n# SCORE=6\n")
    started = wait_until(lambda: next((line for line in grade_log_lines(log)
                                       if line[0] == "start"), None), timeout=60,
                         what="a worker to start grading")
    os.kill(int(started[1]), signal.SIGKILL)  # one worker process dies mid-grade
    wait_until(lambda: _jobs(service.engine)[0][0][1] == "done", timeout=90,
               what="the job to be graded again")
    jobs, results = _jobs(service.engine)
    assert jobs == [(job_id, "done", 2)] and results == {job_id: 1}
    ends = [line for line in grade_log_lines(log) if line[0] == "end"]
    assert len(ends) == 1 and ends[0][1] != started[1]
