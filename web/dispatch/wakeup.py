"""Prompt wake-ups between the processes of one host: "a job is queued", "a status changed".

Each process that waits binds a Unix datagram socket in one folder per service (per
database URL) under the temporary directory, named for its role: ``worker-...`` (grading
workers waiting for jobs) or ``web-...`` (web processes holding requests that wait for a
result). A notifier sends a short datagram to every socket of the role it addresses.

A datagram costs microseconds and nothing piles up when nobody listens. A lost one costs
latency only, never a job or a result: workers still re-check the database every
``POLL_SECONDS`` and waiting requests every ``RECHECK_SECONDS``. Processes on different
hosts share no such folder; there the broker (Dramatiq) delivers jobs and waiting requests
fall back to the re-check.
"""
from __future__ import annotations

import errno
import hashlib
import logging
import os
import select
import socket
import tempfile
import threading
import time
import uuid

log = logging.getLogger(__name__)

WORKER, WEB = "worker", "web"
JOB_MESSAGE = "job"
RECHECK_SECONDS = 1.0  # a waiting request looks at the database at least this often


def wake_dir(database_url: str) -> str:
    """The folder of one service's sockets: short (socket paths are limited to 107 bytes)."""
    digest = hashlib.sha256(database_url.encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"attn-grader-wake-{digest}")


def _own_folder(directory: str) -> str:
    os.makedirs(directory, mode=0o700, exist_ok=True)
    info = os.lstat(directory)
    if info.st_uid != os.getuid() or not os.path.isdir(directory) or os.path.islink(directory):
        raise PermissionError(f"{directory} belongs to another user; wake-ups are disabled")
    return directory


class WakeListener:
    """A bound datagram socket; ``wait`` returns the messages that arrived (may be none)."""

    def __init__(self, directory: str, role: str):
        _own_folder(directory)
        self.path = os.path.join(directory, f"{role}-{os.getpid()}-{uuid.uuid4().hex[:8]}.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.setblocking(False)

    def wait(self, timeout: float | None) -> list[str]:
        try:
            readable, _, _ = select.select([self.sock], [], [], timeout)
        except (OSError, ValueError):  # closed meanwhile
            return []
        messages = []
        while readable:
            try:
                messages.append(self.sock.recv(256).decode("ascii", "replace"))
            except (BlockingIOError, OSError):
                break
        return messages

    def poke(self, message: str = "poke") -> None:
        """Wake this listener's own ``wait`` (a signal handler asking the loop to stop)."""
        _send(self.path, message)

    def close(self) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            pass
        self.sock.close()


_sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
_sender.setblocking(False)
_sender_lock = threading.Lock()


def _send(path: str, message: str) -> bool:
    try:
        with _sender_lock:
            _sender.sendto(message.encode("ascii"), path)
        return True
    except BlockingIOError:  # its queue is full: it has plenty to wake up for already
        return True
    except OSError as exc:
        if exc.errno in (errno.ECONNREFUSED, errno.ENOENT):
            try:  # nobody is bound to it any more (its process died): tidy up
                os.unlink(path)
            except OSError:
                pass
            return False
        log.debug("wake-up to %s failed: %s", path, exc)
        return False


def notify(directory: str, role: str, message: str) -> int:
    """Send ``message`` to every listener of ``role``; returns how many got it."""
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    prefix = role + "-"
    return sum(_send(os.path.join(directory, name), message)
               for name in names if name.startswith(prefix) and name.endswith(".sock"))


def submission_message(submission_id: int) -> str:
    return f"submission {int(submission_id)}"


def notify_submission(directory: str, submission_id: int) -> int:
    """A submission's status changed (claimed, graded, failed): wake requests waiting on it."""
    return notify(directory, WEB, submission_message(submission_id))


class StatusWaiters:
    """Requests of this web process that wait for a submission's status to change.

    One listener thread per process turns ``submission <id>`` datagrams into events; a
    waiting request re-reads the database when its event fires or every RECHECK_SECONDS,
    whichever comes first. At most ``capacity`` requests wait at once, so waiting requests
    never take every thread of the web server: the rest answer at once.
    """

    def __init__(self, directory: str, capacity: int):
        self.directory, self.capacity = directory, capacity
        self.lock = threading.Lock()
        self.events: dict[int, set[threading.Event]] = {}
        self.listener: WakeListener | None = None
        self.waiting = 0

    def _start(self) -> None:
        if self.listener is None:
            try:
                self.listener = WakeListener(self.directory, WEB)
            except OSError as exc:
                log.warning("result wake-ups unavailable (%s); waiting requests re-check the "
                            "database every %.1f s", exc, RECHECK_SECONDS)
                self.listener = False
                return
            threading.Thread(target=self._listen, name="status-wakeups", daemon=True).start()

    def _listen(self) -> None:
        while True:
            for message in self.listener.wait(None):
                kind, _, value = message.partition(" ")
                if kind == "submission" and value.isdigit():
                    with self.lock:
                        for event in self.events.get(int(value), ()):
                            event.set()

    def wait(self, submission_id: int, changed, timeout: float) -> bool:
        """Wait up to ``timeout`` s until ``changed()`` is true; returns its last value.

        ``changed`` reads the database (in a fresh transaction each call).
        """
        if changed():
            return True
        with self.lock:
            if self.waiting >= self.capacity or timeout <= 0:
                return False
            self.waiting += 1
            self._start()
            event = threading.Event()
            self.events.setdefault(submission_id, set()).add(event)
        try:
            deadline = time.monotonic() + timeout
            while True:
                if changed():  # also catches a change between the first look and registering
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                event.wait(min(left, RECHECK_SECONDS))
                event.clear()
        finally:
            with self.lock:
                self.waiting -= 1
                waiting = self.events.get(submission_id)
                waiting.discard(event)
                if not waiting:
                    del self.events[submission_id]
