"""Where Sessions get their children: forked on demand, or pre-warmed single-use workers (GPU)."""
from __future__ import annotations

import threading
from dataclasses import astuple

from .. import settings
from . import wire
from .backends import SandboxUnavailable
from . import forkserver
from .forkserver import StrictChild, ZygoteLost, get_zygote
from .limits import Limits


class WarmPool:
    """Pre-warmed single-use workers: walled in, device initialised, waiting for a submission.

    The GPU path: a process must not fork after CUDA is initialised, so the zygote forks
    the worker first and the worker initialises CUDA inside its walls, in the background,
    before the submission it will run exists. Each worker runs one submission only.
    """

    def __init__(self, wall: bool, gpu: bool, limits: Limits, device: str, size: int):
        self.wall, self.gpu, self.limits, self.device, self.size = wall, gpu, limits, device, size
        self.ready: list[StrictChild] = []
        self.pending = 0
        self.lock = threading.Condition()  # notified when a pending spawn ends (close waits for them)
        self.closed = False

    def _spawn(self) -> StrictChild:
        zygote = get_zygote(self.wall, self.gpu, self.limits)
        return StrictChild(zygote, self.limits, self.device, None, warm=True)

    def refill(self) -> None:
        while True:
            with self.lock:
                if self.closed or len(self.ready) + self.pending >= self.size:
                    return
                self.pending += 1
            try:
                child = self._spawn()
            except Exception:
                child = None
            with self.lock:
                self.pending -= 1
                self.lock.notify_all()
                if child is None:
                    return
                if self.closed:
                    child.kill()
                    return
                self.ready.append(child)

    def take(self, submission_dir: str) -> StrictChild:
        timeout = self.limits.load_seconds
        for attempt in (0, 1):
            with self.lock:
                child = self.ready.pop(0) if self.ready else None
            if child is None:
                try:
                    child = self._spawn()
                except ZygoteLost:
                    if attempt:
                        raise
                    continue  # get_zygote starts a fresh one on the next attempt
            if self.gpu:  # CUDA's start takes seconds: begin the next worker's alongside this run
                threading.Thread(target=self.refill, daemon=True).start()
            try:
                error = child.wait_ready(timeout)
                if error is None:
                    child.attach(submission_dir, timeout)
                    return child
            except (OSError, wire.WireError) as exc:
                error = str(exc)
            except BaseException:
                child.kill()  # never leave a walled-in worker (and its cgroup) behind
                raise
            child.kill()
            if attempt:
                raise SandboxUnavailable(f"the pre-warmed worker could not start: {error}")
        raise AssertionError("unreachable")

    def close(self, timeout: float = 30.0) -> None:
        """Stop the pool; a spawn already under way is waited for, so nothing starts after this."""
        with self.lock:
            self.closed = True
            children, self.ready = self.ready, []
            self.lock.wait_for(lambda: self.pending == 0, timeout)
        for child in children:
            child.kill()


def warm_pool(wall: bool, gpu: bool, limits: Limits, device: str) -> WarmPool:
    key = (wall, gpu, device, astuple(limits))

    def make() -> WarmPool:
        size = settings.value("SANDBOX_WARM_WORKERS")
        return WarmPool(wall, gpu, limits, device, max(1, size))

    return forkserver.warm_pool_for(key, make)



_cpu_prewarm = threading.Event()  # a process-wide switch; off for one-off runs (the pre-check)


def prewarm_cpu(enabled: bool) -> None:
    """Let CPU runs of this process take their children pre-warmed: a grading worker, which
    grades one submission after another, turns it on (``SANDBOX_PREWARM``); a one-off run
    would only fork a child it never uses."""
    (_cpu_prewarm.set if enabled else _cpu_prewarm.clear)()


class ZygoteBackend:
    """Children forked from the shared zygote, each in its own namespaces, cgroup and uid.

    On a GPU (or on CPU once ``prewarm_cpu(True)``: a grading worker's choice) children come
    from a pool of pre-warmed single-use workers instead of being forked on demand.
    """

    def __init__(self, limits: Limits, device: str, *, wall: bool, level: str, warnings=()):
        self.limits, self.device, self.wall, self.level = limits, device, wall, level
        self.warnings = list(warnings)
        self.gpu = device.startswith("cuda")
        self.zygote = get_zygote(wall, self.gpu, limits)  # started (and probed) once per process
        self.pool = None
        if self.gpu or _cpu_prewarm.is_set():
            self.pool = warm_pool(wall, self.gpu, limits, device)
            threading.Thread(target=self.pool.refill, daemon=True).start()

    def session_closed(self) -> None:
        """A session ended: on CPU the next pre-warmed child is forked now, not while that
        session's checks ran (setting a child up took CPU from the grading it overlapped)."""
        if self.pool is not None and not self.gpu:
            threading.Thread(target=self.pool.refill, daemon=True).start()

    def spawn(self, submission_dir: str) -> StrictChild:
        if self.pool is not None:
            return self.pool.take(submission_dir)
        for attempt in (0, 1):
            zygote = self.zygote if attempt == 0 and self.zygote.alive() else get_zygote(
                self.wall, self.gpu, self.limits)
            self.zygote = zygote
            try:
                return StrictChild(zygote, self.limits, self.device, submission_dir)
            except ZygoteLost:
                if attempt:
                    raise
                zygote.close()  # it died under us: the next attempt starts a fresh one
        raise SandboxUnavailable("the fork server is unavailable")
