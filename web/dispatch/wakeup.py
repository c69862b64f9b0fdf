"""Prompt wake-ups between the processes of one host: "a job is queued", "a status changed".

Each process that waits binds a Unix datagram socket in one folder per service (per
database URL) under the temporary directory, named for its role: ``worker-...`` (grading
workers waiting for jobs) or ``web-...`` (web processes holding requests that wait for a
result). A notifier sends a short datagram to every socket of the role it addresses.

A datagram costs microseconds and nothing piles up when nobody listens. A lost one costs
latency only, never a job or a result: workers still re-check the database every
``POLL_SECONDS`` and waiting requests every ``RECHECK_SECONDS``. Processes on different
hosts share no such folder: there the broker (Dramatiq) delivers jobs, and with a Redis
broker the status changes also travel on a Redis pub/sub channel (``RedisRelay``).
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


STATUS_WORDS = ("queued", "running", "done", "failed")


def submission_message(submission_id: int, status: str | None = None) -> str:
    """``submission <id>``, with the new status when the sender knows it (a hint, see
    ``StatusWaiters.wait``)."""
    hint = f" {status}" if status in STATUS_WORDS else ""
    return f"submission {int(submission_id)}{hint}"


def notify_submission(directory: str, submission_id: int, relay=None,
                      status: str | None = None) -> int:
    """A submission's status changed (claimed, graded, failed): wake requests waiting on it,
    on this host by datagram and, through ``relay`` (a ``RedisRelay``), on every other."""
    message = submission_message(submission_id, status)
    if relay is not None:
        relay.publish(message)
    return notify(directory, WEB, message)


class RedisRelay:
    """Status changes between hosts on the broker's Redis: one pub/sub channel per namespace."""

    def __init__(self, url: str, namespace: str):
        import redis

        self.client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
        self.url, self.channel = url, f"{namespace}:submission-status"

    @classmethod
    def for_config(cls, config: dict) -> "RedisRelay | None":
        url = config.get("BROKER_URL") or ""
        if not url.startswith(("redis://", "rediss://", "unix://")):
            return None
        return cls(url, config.get("BROKER_NAMESPACE") or "attn_grader")

    def publish(self, message: str) -> None:
        try:
            self.client.publish(self.channel, message)
        except Exception as exc:  # Redis down: waiting requests re-check by themselves
            log.debug("status relay: publish failed: %s", exc)

    def listen(self, deliver) -> None:
        """Call ``deliver(message)`` for each message, for ever (reconnecting after errors)."""
        import redis

        while True:
            try:
                pubsub = redis.Redis.from_url(self.url, socket_connect_timeout=5).pubsub(
                    ignore_subscribe_messages=True)
                pubsub.subscribe(self.channel)
                for item in pubsub.listen():
                    if item.get("type") == "message":
                        deliver(item["data"].decode("ascii", "replace"))
            except Exception as exc:
                log.warning("status relay: %s; reconnecting in %.0f s", exc, RECHECK_SECONDS)
                time.sleep(RECHECK_SECONDS)


class StatusWaiters:
    """Requests of this web process that wait for a submission's status to change.

    One listener thread per process turns ``submission <id> [status]`` messages into events; a
    waiting request re-reads the database when its event fires or every RECHECK_SECONDS,
    whichever comes first. At most ``capacity`` requests wait at once, so waiting requests
    never take every thread of the web server: the rest answer at once.
    """

    def __init__(self, directory: str, capacity: int, relay: RedisRelay | None = None):
        self.directory, self.capacity, self.relay = directory, capacity, relay
        self.lock = threading.Lock()
        self.events: dict[int, set[_Waiter]] = {}
        self.listener: WakeListener | None = None
        self.waiting = 0

    def _start(self) -> None:
        if self.listener is not None:
            return
        try:
            self.listener = WakeListener(self.directory, WEB)
        except OSError as exc:
            log.warning("result wake-ups unavailable (%s); waiting requests re-check the "
                        "database every %.1f s", exc, RECHECK_SECONDS)
            self.listener = False
        else:
            threading.Thread(target=self._listen, name="status-wakeups", daemon=True).start()
        if self.relay is not None:
            threading.Thread(target=self.relay.listen, args=(self._deliver,),
                             name="status-relay", daemon=True).start()

    def _listen(self) -> None:
        while True:
            for message in self.listener.wait(None):
                self._deliver(message)

    def _deliver(self, message: str) -> None:
        kind, _, rest = message.partition(" ")
        value, _, status = rest.partition(" ")
        if kind == "submission" and value.isdigit():
            with self.lock:
                for waiter in self.events.get(int(value), ()):
                    waiter.hints.append(status if status in STATUS_WORDS else None)
                    waiter.event.set()

    def wait(self, submission_id: int, changed, timeout: float, wants=None) -> bool:
        """Wait up to ``timeout`` s until ``changed()`` is true; returns its last value.

        ``changed`` reads the database (ending its read unless it returns true, so nothing
        is held while waiting). ``wants(status)``, if given, says whether a message's status
        hint could make ``changed()`` true: a wake-up whose every hint it rejects (a "running"
        when only a result will do) costs no read. Each status change arrives twice where a
        Redis relay runs beside the datagrams, and the hints are only a sender's word, so the
        database stays the judge: any wake-up without a hint, and the periodic re-check, still
        read it.
        """
        with self.lock:
            full = self.waiting >= self.capacity or timeout <= 0
            if not full:
                self.waiting += 1
                self._start()
                waiter = _Waiter()
                self.events.setdefault(submission_id, set()).add(waiter)
        if full:  # a look, and the answer as it is
            return changed()
        try:
            deadline = time.monotonic() + timeout
            while True:
                # The first look comes after registering, so a change that lands between
                # the caller's own look and this one still wakes the wait: one read spared.
                if changed():
                    return True
                recheck_at = time.monotonic() + RECHECK_SECONDS
                while True:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    woken = waiter.event.wait(min(left, recheck_at - time.monotonic()))
                    with self.lock:
                        hints, waiter.hints = waiter.hints, []
                        waiter.event.clear()
                    if not woken or not _only_unwanted(hints, wants):
                        break  # time to look: the re-check is due, or the news may be what it waits for
        finally:
            with self.lock:
                self.waiting -= 1
                waiting = self.events.get(submission_id)
                waiting.discard(waiter)
                if not waiting:
                    del self.events[submission_id]


def _only_unwanted(hints: list, wants) -> bool:
    """Every hint names a status that ``wants`` rejects (and there is one): a read would find
    nothing worth answering with."""
    return wants is not None and bool(hints) and all(h is not None and not wants(h) for h in hints)


class _Waiter:
    """One waiting request: its event, and the status hints of the messages that set it."""

    __slots__ = ("event", "hints")

    def __init__(self):
        self.event, self.hints = threading.Event(), []
