"""A grading worker: claim a job, grade it while renewing the lease, store the result fenced.

Run as a process: ``python -m web.dispatch.worker --queues cpu`` (``serve`` and
``attn-grader worker`` start these). Without a broker it claims from the database, woken at
once by a datagram when a job is queued on this host (``wakeup``) and re-checking every
``POLL_SECONDS`` otherwise; with one it consumes Dramatiq messages, each a doorbell for its
queue, and when no message has come for ``POLL_SECONDS`` it looks at the database itself (a
message lost with a Redis restart then costs seconds, not the reconciler's round). Either
way a claim takes the job that has waited longest (``claim.claim_next``), one grading at a
time per process, and each status change (claimed, stored) wakes the web requests waiting
for that submission.

While the database is unreachable (a restart) a claim or a result's store is retried with
a growing pause, instead of dropping the message or the finished grading.

A student program that crashes, times out or runs out of memory comes back from the grader
as a report (a result). Only an exception from the grading machinery itself releases the job
for another attempt.
"""
from __future__ import annotations

import argparse
import itertools
import logging
import os
import signal
import socket
import threading
import time
import traceback
from pathlib import Path

from sqlalchemy.engine import Engine
from sqlalchemy.exc import InterfaceError, OperationalError

from ..db import DatabaseNotMigrated, check_migrated, get_engine
from ..services.grading import (grading_seed, load_grade_function, record_job_failure,
                                record_job_result, report_to_dict)
from ..observability import configure_logging, is_disk_full, log_context
from . import claim as claims
from . import wakeup
from .supervisor import EXIT_SCHEMA
from .threads import apply_threads, threads_per_worker

log = logging.getLogger(__name__)


EXIT_STUCK = 75  # the process exited because a grading run outlived MAX_GRADE_SECONDS
QUIZ_GRADE_FUNCTION = "web.services.quiz_grading:grade_code_try"
DRAMATIQ_IDLE_MS = 30  # longest pause of an idle broker consumer between (cheap) fetches
WARM_UP_TASK = "sdpa"  # graded once at start with the reference implementation (warm_up)
RETRY_PAUSES = (0.5, 1.0, 2.0, 5.0)  # between tries while the database is unreachable; then 5 s


def while_unreachable(what: str, call, budget: float):
    """``call()``, tried again while the database is unreachable, for up to ``budget`` seconds.

    A PostgreSQL restart takes seconds; the job's message or its finished grading should
    outlive it. Errors that are not about reaching the database (a full disk included) are
    raised at once, as is the last one after the budget.
    """
    deadline = time.monotonic() + budget
    for attempt in itertools.count():
        try:
            return call()
        except (OperationalError, InterfaceError) as exc:
            pause = RETRY_PAUSES[min(attempt, len(RETRY_PAUSES) - 1)]
            if is_disk_full(exc) or time.monotonic() + pause > deadline:
                raise
            reason = str(getattr(exc, "orig", exc)).strip().splitlines()[0][:200]
            log.warning("%s: the database is unreachable (%s); trying again in %.1f s", what,
                        reason, pause)
            time.sleep(pause)


def apply_sandbox_prewarm(enabled: bool) -> None:
    """Let the grader's sandbox hand each submission a child forked and walled in before it
    arrived (the next one is forked when that grading ends), instead of setting one up after
    the claim: the same isolation, single use, off the submission's clock."""
    from grader.sandbox.pool import prewarm_cpu

    prewarm_cpu(enabled)


def default_worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class GradingWorker:
    def __init__(self, engine: Engine, config: dict, grade_fn=None, name: str | None = None,
                 on_stuck=None, quiz_grade_fn=None):
        self.engine, self.config = engine, config
        from ..lti import init_engine
        init_engine(engine)  # the scores it records go to the LMS passback outbox too
        self.grade_fn = grade_fn or load_grade_function(config["GRADE_FUNCTION"])
        # quiz code answers: f(question_id, seed, code, lang, sandbox=) -> AnswerResult dict
        self.quiz_grade_fn = quiz_grade_fn or load_grade_function(
            config.get("QUIZ_GRADE_FUNCTION") or QUIZ_GRADE_FUNCTION)
        self.name = name or default_worker_name()
        self.lease_seconds = float(config["LEASE_SECONDS"])
        # A grading run longer than this is presumed stuck (the sandbox ends a student's
        # program long before): the job's lease is let go at once so another worker takes
        # it, and ``on_stuck(claim)`` runs (the worker process exits, to be restarted).
        self.max_grade_seconds = float(config.get("MAX_GRADE_SECONDS") or 900.0)
        self.on_stuck = on_stuck
        self.wake_directory = wakeup.wake_dir(config["DATABASE_URL"])
        self.relay = wakeup.RedisRelay.for_config(config)  # web hosts elsewhere learn too
        self.listener: wakeup.WakeListener | None = None
        # How long a claim or a result's store waits out an unreachable database.
        self.retry_budget = max(30.0, 2 * self.lease_seconds)
        # One grading at a time: a broker message and the idle look at the database both claim.
        self.grading = threading.Lock()
        self.last_message = time.monotonic()  # when a broker message was last handled

    # -- one job -------------------------------------------------------------------------
    def process(self, claim: claims.Claim) -> str:
        """Grade a claimed job; returns "done", "stale", "queued" or "failed"."""
        with log_context(job_id=claim.job_id, submission_id=claim.submission_id,
                         attempt=claim.attempt, worker=self.name, queue=claim.queue):
            started = time.monotonic()
            self._announce(claim, "running")
            outcome = self._grade_and_store(claim)
            # "done", or queued again / failed; a superseded attempt knows nothing of the status
            self._announce(claim, outcome if outcome in ("done", "queued", "failed") else None)
            log.info("job %s attempt %s: %s", claim.job_id, claim.attempt, outcome,
                     extra={"outcome": outcome, "seconds": round(time.monotonic() - started, 3)})
            return outcome

    def _grade_and_store(self, claim: claims.Claim) -> str:
        stop_renewing = threading.Event()
        renewer = threading.Thread(target=self._renew, args=(claim, stop_renewing),
                                   name=f"lease-{claim.job_id}", daemon=True)
        renewer.start()
        try:
            if claim.quiz_try_id is not None:
                data = report_to_dict(self.quiz_grade_fn(
                    claim.question_id, claim.seed, claim.code, claim.lang,
                    sandbox=self.config["SANDBOX"]))
            else:
                data = report_to_dict(self.grade_fn(
                    claim.code, claim.task_id, sandbox=self.config["SANDBOX"],
                    device=claim.device,
                    server_seed=grading_seed(self.config, claim.task_id, claim.code)))
        except Exception as exc:  # the grader itself failed: not the student's fault
            log.error("job %s attempt %s: grader error\n%s", claim.job_id, claim.attempt,
                      traceback.format_exc())
            return while_unreachable(
                f"job {claim.job_id}: releasing it",
                lambda: claims.release(self.engine, claim, f"{type(exc).__name__}: {exc}",
                                       record_job_failure),
                self.retry_budget) or "stale"
        finally:
            stop_renewing.set()
            renewer.join()
        if while_unreachable(f"job {claim.job_id}: storing its result",
                             lambda: claims.finish(self.engine, claim, data, record_job_result),
                             self.retry_budget):
            return "done"
        log.warning("job %s attempt %s was superseded; result dropped", claim.job_id,
                    claim.attempt)
        return "stale"

    def _announce(self, claim: claims.Claim, status: str | None) -> None:
        """Wake web requests waiting on this submission (they re-read it from the database;
        ``status`` lets one that waits for a result sleep on through a mere "running")."""
        if claim.submission_id is None:  # a quiz code answer: its page polls, nothing waits on it
            return
        try:
            wakeup.notify_submission(self.wake_directory, claim.submission_id, self.relay, status)
        except OSError:  # waiting requests re-check by themselves soon
            log.debug("job %s: no wake-up sent", claim.job_id, exc_info=True)

    def _renew(self, claim: claims.Claim, stop: threading.Event) -> None:
        deadline = time.monotonic() + self.max_grade_seconds
        while not stop.wait(max(0.01, min(self.lease_seconds / 3, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                self._give_up(claim)
                return
            try:
                if not claims.renew_lease(self.engine, claim, self.lease_seconds):
                    log.warning("job %s: lost the lease (attempt %s superseded)",
                                claim.job_id, claim.attempt)
                    return
            except Exception:  # a database hiccup; the next renewal may succeed
                log.exception("job %s: lease renewal failed", claim.job_id)

    def _give_up(self, claim: claims.Claim) -> None:
        log.error("job %s attempt %s: grading still running after %.0f s; releasing the job "
                  "to another worker", claim.job_id, claim.attempt, self.max_grade_seconds)
        try:
            claims.renew_lease(self.engine, claim, 0.0)  # expired now: claimable by others
        except Exception:  # it expires by itself within LEASE_SECONDS anyway
            log.exception("job %s: could not release the lease", claim.job_id)
        if self.on_stuck is not None:
            self.on_stuck(claim)

    # -- before the first claim --------------------------------------------------------------
    def warm_up(self, queues) -> None:
        """Grade the reference implementation once per device, off the clock, before claiming.

        A process's first grading pays for what every later one reuses: the sandbox's fork
        server (1-2 s with its probe), the first pre-warmed child, the grader's lazy imports
        and torch's first calls. Paid here, the first submission after a start or a restart
        waits no longer than any other. The report is thrown away; a failure is only logged
        (the first real job meets, and reports, the same problem).
        """
        from reference_impl import attention

        code = Path(attention.__file__).read_text(encoding="utf-8")
        for device in dict.fromkeys("cuda" if q == "gpu" else "cpu" for q in queues):
            started = time.monotonic()
            try:
                self.grade_fn(code, WARM_UP_TASK, sandbox=self.config["SANDBOX"], device=device,
                              server_seed=grading_seed(self.config, WARM_UP_TASK, code))
            except Exception:
                log.warning("worker %s: the warm-up grading on %s failed", self.name, device,
                            exc_info=True)
            else:
                log.info("worker %s: warmed up on %s in %.2f s", self.name, device,
                         time.monotonic() - started)

    # -- polling mode ----------------------------------------------------------------------
    def run_once(self, queues=("cpu",)) -> str | None:
        claim = claims.claim_next(self.engine, self.name, queues, self.lease_seconds)
        return self.process(claim) if claim else None

    def run_polling(self, queues, stop: threading.Event) -> None:
        idle = float(self.config["POLL_SECONDS"])
        try:
            self.listener = wakeup.WakeListener(self.wake_directory, wakeup.WORKER)
        except OSError as exc:
            log.warning("worker %s: no wake-ups (%s); re-checking every %s s", self.name, exc,
                        idle)
        try:
            while not stop.is_set():
                try:
                    outcome = self.run_once(queues)
                except Exception:  # database unavailable: wait and retry, never exit
                    log.exception("worker %s: claim failed", self.name)
                    outcome = None
                if outcome is None and not stop.is_set():
                    if self.listener is not None:
                        self.listener.wait(idle)  # a queued job (or stop) wakes it at once
                    else:
                        stop.wait(idle)
        finally:
            if self.listener is not None:
                self.listener.close()
                self.listener = None

    def wake(self) -> None:
        """Interrupt an idle wait (called from a signal handler after setting ``stop``)."""
        listener = self.listener
        if listener is not None:
            try:
                listener.poke()
            except OSError:
                pass

    # -- broker mode -----------------------------------------------------------------------
    def handle_message(self, job_id: int, queue: str = "cpu") -> str | None:
        """A message rang ``queue``'s doorbell (for job ``job_id``): claim and grade the job
        that has waited longest there. Usually that is ``job_id``; it is an older one when a
        worker was lost or a message went missing, which then waits behind no later message.
        A message that finds nothing (its job went with an earlier message or an idle look at
        the database) does nothing. Returns the outcome, or None."""
        with self.grading:
            try:
                claim = while_unreachable(
                    f"message for job {job_id}",
                    lambda: claims.claim_next(self.engine, self.name, [queue], self.lease_seconds),
                    self.retry_budget)
            except (OperationalError, InterfaceError) as exc:
                log.warning("message for job %s: the database stayed unreachable (%s); the job "
                            "waits for the next look at the database", job_id,
                            type(exc).__name__)
                claim = None
            try:
                return self.process(claim) if claim else None
            finally:
                self.last_message = time.monotonic()

    def look_when_idle(self, queues, stop: threading.Event) -> None:
        """Broker mode's backstop: once no message has come for ``POLL_SECONDS``, claim from
        the database directly, as a polling worker does, until it has nothing left. Jobs whose
        message was lost (a Redis restart, a web process that died before sending) are found
        within seconds; with messages flowing, this costs nothing."""
        idle = float(self.config["POLL_SECONDS"])
        pause = idle
        while not stop.wait(pause):
            pause = idle
            if time.monotonic() - self.last_message < idle or not self.grading.acquire(False):
                continue  # messages are flowing, or one is being graded
            try:
                claim = claims.claim_next(self.engine, self.name, queues, self.lease_seconds)
                if claim is not None:
                    self.process(claim)
                    pause = 0  # look again at once: more may be waiting
            except Exception:  # the database is unavailable: the next look tries again
                log.warning("worker %s: looking for jobs failed", self.name, exc_info=True)
            finally:
                self.grading.release()

    def run_dramatiq(self, queues, stop: threading.Event) -> None:
        import dramatiq

        from .broker import declare_actors, make_broker

        # Its own broker, declaring the actors once: this process consumes, it sends nothing.
        broker = make_broker(self.config["BROKER_URL"], self.config.get("BROKER_NAMESPACE"))
        declare_actors(broker, self.handle_message, self.max_grade_seconds)
        # An idle Redis consumer sleeps between fetches, backing off up to worker_timeout
        # (1 s by default): a job queued on an idle service waited for that. It also sleeps
        # so while its prefetch is full, which is why the prefetch stays at two: the next
        # job is then already here when one ends (measured: one job at a time lost a fifth
        # of a burst's throughput to those sleeps).
        worker = dramatiq.Worker(broker, queues=set(queues), worker_threads=1,
                                 worker_timeout=DRAMATIQ_IDLE_MS)
        worker.start()
        try:
            self.look_when_idle(queues, stop)
        finally:
            worker.stop()
            broker.close()


def _watch_parent(parent: int, stop: threading.Event, wake=lambda: None) -> None:
    """A supervisor killed with SIGKILL cannot stop its workers; they notice and leave."""
    while os.getppid() == parent:
        if stop.wait(1.0):
            return
    log.warning("the supervising process %s is gone; stopping", parent)
    stop.set()
    wake()


def main(argv=None) -> int:
    from ..config import load_config

    parser = argparse.ArgumentParser(description="One grading worker process.")
    parser.add_argument("--queues", default="cpu", help="comma-separated: cpu, gpu")
    parser.add_argument("--name", default=None, help="worker name recorded on jobs")
    parser.add_argument("--parent-pid", type=int, default=None,
                        help="stop (after the current job) once this process is no longer "
                             "the parent (the supervisor died)")
    args = parser.parse_args(argv)
    configure_logging("INFO")
    logging.getLogger("alembic").setLevel(logging.WARNING)
    config = load_config()
    # Before the grade function imports torch; a worker started by hand counts as alone.
    apply_threads(threads_per_worker(config["TORCH_THREADS"], workers=1))
    apply_sandbox_prewarm(config["SANDBOX_PREWARM"])
    engine = get_engine(config["DATABASE_URL"])
    try:
        check_migrated(engine)
    except DatabaseNotMigrated as exc:  # one line, not a traceback: its supervisor backs off
        log.error("worker %s: %s", args.name or default_worker_name(), exc)
        return EXIT_SCHEMA
    # A stuck grading run cannot be interrupted from Python: exit, and the supervisor
    # (serve / attn-grader worker / systemd) starts a fresh process.
    worker = GradingWorker(engine, config, name=args.name,
                           on_stuck=lambda claim: os._exit(EXIT_STUCK))
    queues = [q.strip() for q in args.queues.split(",") if q.strip()]

    stop = threading.Event()

    def request_stop(*_):  # finish the current job, then exit
        stop.set()
        worker.wake()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, request_stop)
    if args.parent_pid:
        threading.Thread(target=_watch_parent, args=(args.parent_pid, stop, worker.wake),
                         daemon=True).start()
    worker.warm_up(queues)
    mode = "dramatiq" if config.get("BROKER_URL") else "database"
    log.info("worker %s consuming %s (%s)", worker.name, ",".join(queues), mode)
    if mode == "dramatiq":
        worker.run_dramatiq(queues, stop)
    else:
        worker.run_polling(queues, stop)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
