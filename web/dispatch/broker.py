"""Notifying workers that a job is waiting: the doorbell beside the database queue.

The database is the queue (``claim``); a notification only wakes a worker to claim a job
sooner. Without a broker the workers claim from the database by themselves, and
``DatabaseDispatcher`` wakes the idle ones on this host at once (``wakeup``) instead of
leaving them to their next re-check. With ``ATTN_GRADER_BROKER_URL=redis://...`` (or
``amqp://...`` for RabbitMQ) notifications travel through Dramatiq to ``attn-grader worker``
processes on any host (``DramatiqDispatcher``). A message carries only the id of the job it
was sent for and is a doorbell for its queue: the worker claims, with the same fenced code,
the job there that has waited longest. So a duplicate or late message is harmless, and a
lost one costs nothing while messages flow and seconds when they stop (an idle worker looks
at the database, ``GradingWorker.look_when_idle``). ``stub://`` uses Dramatiq's StubBroker.

The sending side (the web app, the reconciler, ``attn-grader regrade``) enqueues a
``dramatiq.Message`` for the actor by name, as Dramatiq's API allows for actors declared in
another process; only a worker declares the actors (``declare_actors``), bound to its own
``GradingWorker.handle_message``.
"""
from __future__ import annotations

import logging

import dramatiq

log = logging.getLogger(__name__)
QUEUES = ("cpu", "gpu")
# Retries and time limits are the job's own (``attempts``/``max_attempts``, the lease, and
# MAX_GRADE_SECONDS in the worker); Dramatiq's would re-run a job outside that accounting or
# interrupt a grading run, so they are kept out of the way: no retries, and a time limit
# twice the worker's own (which ends a stuck run first: the worker process exits).
NO_RETRIES = {"max_retries": 0}


def actor_name(queue: str) -> str:
    return f"grade_job_{queue}"


class DatabaseDispatcher:
    """Workers claim from the database by themselves; notifying wakes this host's idle ones."""
    kind = "database"

    def __init__(self, wake_directory: str | None = None):
        self.wake_directory = wake_directory

    def notify(self, jobs) -> None:
        if self.wake_directory and jobs:
            from .wakeup import JOB_MESSAGE, WORKER, notify

            notify(self.wake_directory, WORKER, JOB_MESSAGE)


class DramatiqDispatcher:
    """Publishes job ids to a Dramatiq queue per device kind (``cpu``, ``gpu``)."""
    kind = "dramatiq"

    def __init__(self, broker: dramatiq.Broker):
        self.broker = broker
        for queue in QUEUES:
            broker.declare_queue(queue)

    def notify(self, jobs) -> None:
        for job_id, queue in jobs:
            self.broker.enqueue(dramatiq.Message(queue_name=queue, actor_name=actor_name(queue),
                                                 args=(int(job_id),), kwargs={}, options={}))


def make_broker(url: str, namespace: str = "attn_grader") -> dramatiq.Broker:
    if url.startswith("stub://"):
        from dramatiq.brokers.stub import StubBroker

        return StubBroker()
    if url.startswith(("redis://", "rediss://", "unix://")):
        import redis
        from dramatiq.brokers.redis import RedisBroker

        # Timeouts: a Redis that stops answering (a host cut off) fails a send or a fetch in
        # seconds, as one that is down does, instead of hanging a web request or a worker.
        client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=10)
        return RedisBroker(client=client, namespace=namespace)
    if url.startswith(("amqp://", "amqps://")):
        from dramatiq.brokers.rabbitmq import RabbitmqBroker

        return RabbitmqBroker(url=url)
    raise ValueError(f"ATTN_GRADER_BROKER_URL={url!r}: expected redis://, amqp:// or stub://")


def declare_actors(broker: dramatiq.Broker, handle_job, max_grade_seconds: float) -> None:
    """The worker's side: one actor per queue on ``broker``, each calling
    ``handle_job(job_id, queue)``."""
    for queue in QUEUES:
        def ring(job_id: int, queue: str = queue) -> None:
            handle_job(job_id, queue)  # nothing returned: Dramatiq warns of any value per job

        dramatiq.actor(ring, broker=broker, actor_name=actor_name(queue), queue_name=queue,
                       time_limit=int(2_000 * max_grade_seconds), **NO_RETRIES)
    # Dramatiq declares a delay queue beside each queue, and a worker consumes every declared
    # one. Nothing here is ever delayed (no retries, no eta), yet on Redis that consumer fetched
    # as often as the real one (every DRAMATIQ_IDLE_MS when idle, and throughout a burst, when
    # the real one sits on a full prefetch): half the worker's broker calls, a few ms of CPU per
    # job. Forgotten before the worker starts, they get no consumer.
    broker.delay_queues.clear()


_dispatchers: dict = {}


def make_dispatcher(config: dict):
    """The dispatcher for ``config`` (one per broker URL per process)."""
    url = config.get("BROKER_URL")
    if not url:
        from .wakeup import wake_dir

        return DatabaseDispatcher(wake_dir(config["DATABASE_URL"]))
    key = (url, config.get("BROKER_NAMESPACE"))
    if key not in _dispatchers:
        _dispatchers[key] = DramatiqDispatcher(make_broker(url, config.get("BROKER_NAMESPACE")))
    return _dispatchers[key]
