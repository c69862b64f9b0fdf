"""Private PostgreSQL and Redis servers that fault tests may kill and restart.

The shared servers on 5432/6379 belong to everyone's tests and are never touched: each
fault test starts its own instance in a temporary folder on a free port, and always stops
and deletes it. Where the server binaries are missing the test skips and says which.
"""
from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from service_support import free_port


def _wait_port(port: int, timeout: float = 20.0, up: bool = True) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                if up:
                    return
        except OSError:
            if not up:
                return
        time.sleep(0.05)
    raise AssertionError(f"port {port} did not come {'up' if up else 'down'} in {timeout} s")


class PrivateRedis:
    """``redis-server`` on a free port with no persistence: a restart loses every message."""

    def __init__(self):
        self.binary = shutil.which("redis-server")
        if self.binary is None:
            pytest.skip("redis-server is not installed (apt-get install redis-server)")
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_port(self.port)

    def kill(self) -> None:
        """SIGKILL: like a crash or an OOM kill; nothing is saved."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        _wait_port(self.port, up=False)

    def stop(self) -> None:
        self.kill()


class PrivatePostgres:
    """A throw-away cluster (``initdb``) on a free port, run as the ``postgres`` user if root."""

    def __init__(self):
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        bindir = os.path.dirname(found[-1]) if found else None
        if bindir is None and shutil.which("initdb"):
            bindir = os.path.dirname(shutil.which("initdb"))
        if bindir is None:
            pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
        self.bindir = bindir
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="attn-faults-pg-"))
        self.data = self.root / "data"
        self.as_user: list[str] = []
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            if shutil.which("runuser") is None:
                pytest.skip("running as root without runuser: cannot start PostgreSQL")
            self.as_user = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.root, "postgres")
        self.started = False

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args, check=True) -> subprocess.CompletedProcess:
        return subprocess.run([*self.as_user, *args], capture_output=True, text=True,
                              check=check, timeout=120)

    def init(self) -> None:
        try:
            self._run(f"{self.bindir}/initdb", "-D", str(self.data), "-U", "postgres",
                      "-A", "trust", "--no-sync", "-E", "UTF8")
        except subprocess.CalledProcessError as exc:
            pytest.skip(f"initdb failed: {exc.stderr.strip()[-300:]}")

    def start(self) -> None:
        # fsync=off: the OS's cache outlives the server's crash, which is all these tests make.
        # synchronous_commit stays on, as in production: with it off, an immediate stop dropped
        # transactions committed in the last moments (the test's own API token: a 401 after).
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} "
                   "-c fsync=off -c full_page_writes=off")
        self._run(f"{self.bindir}/pg_ctl", "-D", str(self.data), "-o", options, "-w",
                  "-t", "60", "-l", str(self.root / "server.log"), "start")
        self.started = True
        _wait_port(self.port)

    def stop(self, mode: str = "fast") -> None:
        if self.started:
            self._run(f"{self.bindir}/pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop",
                      check=False)
            self.started = False

    def restart(self, mode: str = "immediate", down_seconds: float = 1.0) -> None:
        """``immediate`` drops every connection without a checkpoint, like a crash."""
        self.stop(mode)
        time.sleep(down_seconds)
        self.start()

    def cleanup(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


class ReconcilerThread:
    """What ``attn-grader worker``'s supervisor does: run the reconciler every ``interval``."""

    def __init__(self, engine, dispatcher, interval: float = 0.5, stale: float = 2.0):
        self.engine, self.dispatcher = engine, dispatcher
        self.interval, self.stale = interval, stale
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True, name="test-reconciler")

    def _loop(self) -> None:
        from web.services.grading import reconcile_jobs as reconcile

        while not self.stop_event.wait(self.interval):
            try:
                reconcile(self.engine, self.dispatcher, queued_stale_seconds=self.stale)
            except Exception:  # the database or broker is down right now: try again
                pass

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop_event.set()
        self.thread.join(10)


def stop_processes(*procs) -> None:
    for proc in procs:
        if proc is not None and proc.poll() is None:
            proc.terminate()
    for proc in procs:
        if proc is not None:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
