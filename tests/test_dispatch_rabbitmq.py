"""The documented ``amqp://`` broker: job ids through Dramatiq on the RabbitMQ at
127.0.0.1:5672 (user guest), graded by ``attn-grader worker``, each exactly once."""
import os
import signal
import subprocess
import sys

import pytest
from sqlalchemy import func, select

from service_support import ROOT, _reachable, env_for, wait_until
from web import create_app
from web.db import session_factory
from web.models import GradingJob, Result

AMQP_URL = "amqp://guest:guest@127.0.0.1:5672/%2F"
pytestmark = [pytest.mark.integration,
              pytest.mark.parametrize("service", ["sqlite"], indirect=True)]


@pytest.fixture
def rabbit(service):
    if not _reachable(5672):
        pytest.skip("RabbitMQ is not reachable on 127.0.0.1:5672")
    from web.dispatch.broker import make_broker

    broker = make_broker(AMQP_URL)
    for queue in ("cpu", "gpu"):  # messages left by an earlier run name other databases' jobs
        broker.declare_queue(queue)
        broker.flush(queue)
    broker.close()
    config = {**service.config, "BROKER_URL": AMQP_URL, "RECONCILE_SECONDS": 0.5}
    app = create_app(config)
    proc = subprocess.Popen(
        [sys.executable, "-m", "grader.cli", "worker", "--queues", "cpu", "--processes", "1"],
        env=env_for(config), cwd=ROOT, start_new_session=True)
    yield app, service
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(30 + 15)  # past Supervisor.stop's own 30 s bound


def test_jobs_published_on_rabbitmq_are_graded_once(rabbit):
    app, service = rabbit
    assert app.extensions["attn_grader"].dispatcher.kind == "dramatiq"
    headers = {"Authorization": f"Bearer {service.people['ada']['token']}"}
    ids = []
    for n in range(3):
        r = app.test_client().post("/api/v1/submissions", headers=headers,
                                   json={"task": "sdpa", "code": f"# SCORE={n + 5}\n"})
        assert r.status_code == 202, r.get_json()
        ids.append(r.get_json()["id"])

    def graded():
        with session_factory(service.engine)() as session:
            return session.execute(select(GradingJob.status, GradingJob.attempts)
                                   .order_by(GradingJob.id)).all()
    wait_until(lambda: [s for s, _ in graded()] == ["done"] * 3, timeout=90,
               what="3 jobs graded through RabbitMQ")
    assert [a for _, a in graded()] == [1, 1, 1]
    with session_factory(service.engine)() as session:
        counts = dict(session.execute(select(Result.submission_id, func.count(Result.id))
                                      .group_by(Result.submission_id)).all())
    assert counts == {i: 1 for i in ids}
