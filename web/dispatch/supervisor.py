"""Starts grading worker processes, restarts any that die, and runs a host's periodic round
beside them: the reconciler and the LMS grade passback, which the command hands in
(``web.housekeeping.host_round``; this module imports no services and no LTI).

``serve`` runs one of these next to the web server; ``attn-grader worker`` runs one per
host. GPU workers get one process per GPU with ``CUDA_VISIBLE_DEVICES`` pinned to it.
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from ..db import get_engine
from .broker import make_dispatcher
from .threads import thread_environment, threads_per_worker

log = logging.getLogger(__name__)


@dataclass
class WorkerSpec:
    name: str
    queues: str
    env: dict


def worker_specs(cpu_processes: int, gpus=(), prefix: str = "") -> list[WorkerSpec]:
    """Worker processes named ``<host>:<this command's pid>:cpu0`` and so on: two worker
    commands on one host (or a host's successive ones) never share a name, which the jobs,
    the results and ``attn_grader_workers_seen`` record."""
    host = prefix or f"{os.uname().nodename}:{os.getpid()}"
    specs = [WorkerSpec(f"{host}:cpu{i}", "cpu", {"CUDA_VISIBLE_DEVICES": ""})
             for i in range(cpu_processes)]
    specs += [WorkerSpec(f"{host}:gpu{gpu}", "gpu", {"CUDA_VISIBLE_DEVICES": str(gpu)})
              for gpu in gpus]
    return specs


WATCH_SECONDS = 1.0  # how often the supervisor looks at its workers
EXIT_SCHEMA = 78  # a worker refused the database's schema at start (EX_CONFIG)


class RestartBackoff:
    """When to restart a worker that exited: at once after a long run, then after 1, 2, 4 ...
    up to 60 s while it keeps exiting soon after its start.

    A worker refused at start (an old release on a schema it cannot run on, the database
    unreachable) would otherwise be restarted every second for as long as the cause lasts,
    each time with a traceback; a crash after a long, useful run is restarted at once.
    """
    FIRST, LONGEST, STABLE = 1.0, 60.0, 60.0  # seconds

    def __init__(self):
        self.quick_exits = 0
        self.started_at = 0.0
        self.not_before: float | None = None

    def started(self, now: float) -> None:
        self.started_at, self.not_before = now, None

    def after_exit(self, now: float) -> float | None:
        """The pause before the restart (None when this exit was already counted)."""
        if self.not_before is not None:
            return None
        ran = now - self.started_at
        self.quick_exits = self.quick_exits + 1 if ran < self.STABLE else 0
        delay = 0.0 if not self.quick_exits else \
            min(self.LONGEST, self.FIRST * 2 ** (self.quick_exits - 1))
        self.not_before = now + delay
        return delay


class Supervisor:
    def __init__(self, config: dict, specs: list[WorkerSpec], housekeeping=None):
        """``housekeeping(engine, dispatcher, config)``: run every ``RECONCILE_SECONDS`` in a
        thread of this process (None: not on this host)."""
        self.config, self.specs = config, specs
        self.housekeeping = housekeeping
        self.procs: dict[str, subprocess.Popen] = {}
        # Every worker of this host shares its cores: each gets its share, so they never
        # oversubscribe them (the web server's threads mostly wait on I/O).
        self.torch_threads = threads_per_worker(int(config.get("TORCH_THREADS") or 0),
                                                len(specs))
        self.stop_event = threading.Event()
        self._threads: list[threading.Thread] = []
        self.backoff: dict[str, RestartBackoff] = {}

    def _spawn(self, spec: WorkerSpec) -> subprocess.Popen:
        self.backoff.setdefault(spec.name, RestartBackoff()).started(time.monotonic())
        env = {**os.environ, **thread_environment(self.torch_threads), **spec.env}
        # The child reads the same settings from its environment.
        for key in ("DATABASE_URL", "SECRET_KEY", "BROKER_URL", "INSTANCE_PATH", "SANDBOX",
                    "GRADE_FUNCTION", "LEASE_SECONDS", "POLL_SECONDS", "BROKER_NAMESPACE",
                    "MAX_GRADE_SECONDS", "SANDBOX_PREWARM"):
            if self.config.get(key) is not None:
                env["ATTN_GRADER_" + key] = str(self.config[key])
        env["ATTN_GRADER_TORCH_THREADS"] = str(self.torch_threads)
        return subprocess.Popen(
            [sys.executable, "-m", "web.dispatch.worker", "--queues", spec.queues,
             "--name", spec.name, "--parent-pid", str(os.getpid())], env=env)

    def start(self) -> None:
        for spec in self.specs:
            self.procs[spec.name] = self._spawn(spec)
        self._threads.append(threading.Thread(target=self._watch, name="supervisor",
                                              daemon=True))
        if self.housekeeping is not None:
            self._threads.append(threading.Thread(target=self._housekeeping_loop,
                                                  name="reconciler", daemon=True))
        for thread in self._threads:
            thread.start()

    def _watch(self) -> None:
        while not self.stop_event.wait(WATCH_SECONDS):
            now = time.monotonic()
            for spec in self.specs:
                proc = self.procs.get(spec.name)
                if proc is None or proc.poll() is None or self.stop_event.is_set():
                    continue
                backoff = self.backoff.setdefault(spec.name, RestartBackoff())
                delay = backoff.after_exit(now)
                if delay is not None:  # None: this exit was seen, its pause is running
                    why = " (it refused the database's schema: see its log line)" \
                        if proc.returncode == EXIT_SCHEMA else ""
                    log.warning("worker %s exited with %s%s; restarting in %.0f s", spec.name,
                                proc.returncode, why, delay)
                if now >= backoff.not_before:
                    self.procs[spec.name] = self._spawn(spec)

    def _housekeeping_loop(self) -> None:
        engine = get_engine(self.config["DATABASE_URL"])
        dispatcher = make_dispatcher(self.config)
        interval = float(self.config["RECONCILE_SECONDS"])
        while not self.stop_event.wait(interval):
            try:
                self.housekeeping(engine, dispatcher, self.config)
            except Exception:  # the round logs its own parts' failures; never stop the loop
                log.exception("housekeeping round failed; retrying in %s s", interval)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM every worker (each finishes its current job), then SIGKILL stragglers."""
        self.stop_event.set()
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + timeout
        for proc in self.procs.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def wait(self) -> None:
        self.stop_event.wait()
