"""Notifying workers that a job is waiting.

Without a broker the workers claim from the database; ``DatabaseDispatcher`` only wakes the
idle ones on this host at once (``wakeup``) instead of leaving them to their next re-check.
With ``ATTN_GRADER_BROKER_URL=redis://...`` (or ``amqp://...`` for RabbitMQ) job ids travel
through Dramatiq to ``attn-grader worker`` processes on any host (``DramatiqDispatcher``); the
message carries only the id, and the worker claims the job with the same fenced code, so a
duplicate or late message is harmless. ``stub://`` uses Dramatiq's in-memory StubBroker.
"""
from __future__ import annotations

import logging

import dramatiq

log = logging.getLogger(__name__)
ACTOR_PREFIX = "grade_job"
# Dramatiq's own retries would re-run a job outside our claim accounting; infrastructure
# retries are the job's ``attempts``, and student crashes are results, not retries.
ACTOR_OPTIONS = {"max_retries": 0, "time_limit": 3_600_000}


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
        self.actors = declare_actors(broker)

    def notify(self, jobs) -> None:
        for job_id, queue in jobs:
            self.actors[queue].send(int(job_id))


def make_broker(url: str, namespace: str = "attn_grader") -> dramatiq.Broker:
    if url.startswith("stub://"):
        from dramatiq.brokers.stub import StubBroker

        return StubBroker()
    if url.startswith(("redis://", "rediss://", "unix://")):
        from dramatiq.brokers.redis import RedisBroker

        return RedisBroker(url=url, namespace=namespace)
    if url.startswith(("amqp://", "amqps://")):
        from dramatiq.brokers.rabbitmq import RabbitmqBroker

        return RabbitmqBroker(url=url)
    raise ValueError(f"ATTN_GRADER_BROKER_URL={url!r}: expected redis://, amqp:// or stub://")


_job_handler = None  # set by the worker process: callable(job_id) -> None


def set_job_handler(handler) -> None:
    global _job_handler
    _job_handler = handler


def _handle(job_id: int) -> None:
    if _job_handler is None:
        raise RuntimeError("this process has no grading worker set up (set_job_handler)")
    _job_handler(job_id)


def declare_actors(broker: dramatiq.Broker) -> dict:
    """One actor per queue, bound to ``broker`` (idempotent)."""
    actors = {}
    for queue in ("cpu", "gpu"):
        name = f"{ACTOR_PREFIX}_{queue}"
        if name in broker.actors:
            actors[queue] = broker.get_actor(name)
        else:
            actors[queue] = dramatiq.Actor(_handle, broker=broker, actor_name=name,
                                           queue_name=queue, priority=0,
                                           options=dict(ACTOR_OPTIONS))
    return actors


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
