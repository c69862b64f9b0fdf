"""What one run holds besides its processes: a slot uid, and the janitor that frees it all."""
from __future__ import annotations

import fcntl
import os
import tempfile
import threading
import time

from .backends import SandboxUnavailable
from .cgroups import RunCgroup

UID_BASE = int(os.environ.get("ATTN_GRADER_SANDBOX_UID_BASE", "60000"))
UID_SLOTS = int(os.environ.get("ATTN_GRADER_SANDBOX_UID_SLOTS", "1000"))


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
    """Finishes teardown off the grading path: stragglers killed, cgroup removed, uid freed."""

    def __init__(self):
        self.queue: list = []
        self.cond = threading.Condition()
        self.thread = None

    def submit(self, cgroup: RunCgroup, slot: Slot, captures=(), status_fd: int = -1) -> None:
        with self.cond:
            self.queue.append((cgroup, slot, captures, status_fd))
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._run, name="sandbox-janitor", daemon=True)
                self.thread.start()
            self.cond.notify_all()

    def _run(self) -> None:
        while True:
            with self.cond:
                while not self.queue:
                    if not self.cond.wait(5.0):
                        self.thread = None
                        return
                cgroup, slot, captures, status_fd = self.queue[0]
            try:
                cgroup.kill()
                for capture in captures:
                    capture.join(5.0)  # EOF once the run's last process is gone
                cgroup.remove()
                if status_fd >= 0:
                    os.close(status_fd)
            finally:
                slot.release()  # the uid is reused only once nothing of this run is left
                with self.cond:
                    self.queue.pop(0)
                    self.cond.notify_all()

    def drain(self, timeout: float = 10.0) -> bool:
        """Wait until every finished run is fully torn down (tests, shutdown)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while self.queue:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
        return True
