"""What one run holds besides its processes: a slot uid, and the janitor that frees it all."""
from __future__ import annotations

import fcntl
import logging
import os
import tempfile
import threading
import time

from .backends import SandboxUnavailable
from . import policy
from .cgroups import RunCgroup

log = logging.getLogger(__name__)
# The per-run uid range, read once: a slot's lock file is named by its number.
UID_BASE, UID_SLOTS = policy.uid_slots()


class Slot:
    """A per-run uid, unique across the grader's processes (held by an flock)."""

    _dir = os.path.join(tempfile.gettempdir(), "attn-grader-slots")
    _next = 0
    _lock = threading.Lock()

    def __init__(self):
        os.makedirs(self._dir, mode=0o700, exist_ok=True)
        with Slot._lock:
            for i in range(UID_SLOTS):
                n = (Slot._next + i) % UID_SLOTS
                fd = os.open(os.path.join(self._dir, f"slot-{n}"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    os.close(fd)
                    continue
                Slot._next = n + 1
                self.fd, self.uid = fd, UID_BASE + n
                return
        raise SandboxUnavailable(f"all {UID_SLOTS} sandbox slots are busy")

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing drops the flock
            self.fd = -1


class Janitor:
    """Finishes teardown off the grading path: stragglers killed, cgroup removed, uid freed.

    A run whose cgroup cannot be removed yet (a process slow to die: D state, a loaded host)
    is kept and retried every second rather than forgotten: a forgotten cgroup would stay
    until the grader process exits.
    """

    RETRY_SECONDS = 1.0

    def __init__(self):
        self.queue: list = []
        self.lingering: list = []  # (cgroup, slot, first failure time) whose removal is retried
        self._last_retry = 0.0
        self.cond = threading.Condition()
        self.thread = None

    def submit(self, cgroup: RunCgroup, slot: Slot, captures=(), status_fd: int = -1) -> None:
        with self.cond:
            self.queue.append((cgroup, slot, captures, status_fd))
            self._start()
            self.cond.notify_all()

    def _start(self) -> None:
        if self.thread is None or not self.thread.is_alive():
            self.thread = threading.Thread(target=self._run, name="sandbox-janitor", daemon=True)
            self.thread.start()

    def _run(self) -> None:
        while True:
            with self.cond:
                while not self.queue:
                    if self.lingering:
                        self.cond.wait(self.RETRY_SECONDS)
                        break
                    if not self.cond.wait(5.0):
                        self.thread = None
                        return
                item = self.queue[0] if self.queue else None
            if item is not None:
                self._tear_down(*item)
            self._retry_lingering()

    def _tear_down(self, cgroup: RunCgroup, slot: Slot, captures, status_fd: int) -> None:
        removed = False
        try:
            cgroup.kill()
            for capture in captures:
                capture.join(5.0)  # EOF once the run's last process is gone
            removed = cgroup.remove()
        except Exception:  # noqa: BLE001 - the janitor must outlive any one run's surprise
            log.exception("sandbox: tearing down %s failed", cgroup.dirs)
        finally:
            if status_fd >= 0:
                try:
                    os.close(status_fd)
                except OSError:
                    pass
            if not removed:
                log.warning("sandbox: run cgroup not removable yet, will retry: %s", cgroup.describe())
            with self.cond:
                if removed:
                    slot.release()  # the uid is reused only once nothing of this run is left
                else:
                    self.lingering.append((cgroup, slot, time.monotonic()))
                self.queue.pop(0)
                self.cond.notify_all()

    def _retry_lingering(self) -> None:
        """One more try for each lingering run, at most every RETRY_SECONDS (not after every run)."""
        with self.cond:
            if time.monotonic() - self._last_retry < self.RETRY_SECONDS:
                return
            self._last_retry = time.monotonic()
            waiting = list(self.lingering)
        for entry in waiting:
            cgroup, slot, since = entry
            try:
                removed = cgroup.remove(timeout=0.2)
            except Exception:  # noqa: BLE001
                removed = False
            with self.cond:
                if removed:
                    self.lingering.remove(entry)
                    slot.release()
                    log.warning("sandbox: run cgroup removed after %.1f s: %s",
                                time.monotonic() - since, cgroup.dirs[0])
                    self.cond.notify_all()

    def wait_gone(self, cgroup: RunCgroup, timeout: float) -> bool:
        """Wait until ``cgroup``'s run is torn down (nothing of it runs, its cgroup is removed)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while any(item[0] is cgroup for item in self.queue + self.lingering):
                self._start()
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(min(left, self.RETRY_SECONDS))
        return True

    def drain(self, timeout: float = 10.0) -> bool:
        """Wait until every finished run is fully torn down (tests, shutdown)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while self.queue or self.lingering:
                self._start()  # a lingering run is retried only while the thread runs
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(min(left, self.RETRY_SECONDS))
        return True
