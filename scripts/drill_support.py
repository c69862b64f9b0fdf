"""Shared pieces of the fault drills (``scripts/drill_*.py``): a private PostgreSQL cluster on a
size-limited tmpfs, the service's web and worker commands against it, and an API client.

Everything runs on this machine, as root (mounts, cgroups, ``runuser postgres``): the
machine's PostgreSQL binaries start a cluster of the drill's own (its own port and socket
folder, nothing shared with the machine's cluster), the machine's Redis carries the doorbell
in a namespace of the drill's own (its keys deleted at the end). Every process the drill
starts is stopped by it, by its own pid.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG_BIN = Path(os.environ.get("DRILL_PG_BIN", "/usr/lib/postgresql/15/bin"))
REDIS = os.environ.get("DRILL_REDIS", "redis://127.0.0.1:6379/7")
REFERENCE = (ROOT / "reference_impl" / "attention.py").read_text(encoding="utf-8")


def say(*parts) -> None:
    print(time.strftime("%H:%M:%S"), *parts, flush=True)


def run(cmd, check=True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=check, capture_output=True, text=True, **kw)


@contextmanager
def tmpfs(path: Path, size_mb: int):
    """A tmpfs of ``size_mb`` MiB mounted at ``path`` (the drill's "disk")."""
    path.mkdir(parents=True, exist_ok=True)
    run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0755", "tmpfs", str(path)])
    try:
        yield path
    finally:
        run(["umount", "-l", str(path)], check=False)


def fill(path: Path, chunk: int = 1 << 20) -> int:
    """Write ``path`` until the filesystem is full; returns the bytes written."""
    written = 0
    block = b"\0" * chunk
    with open(path, "wb", buffering=0) as fh:
        while True:
            try:
                written += fh.write(block)
            except OSError:  # ENOSPC: the disk is full (smaller pieces fill the rest)
                if chunk <= 4096:
                    return written
                block = block[: len(block) // 4]
                chunk = len(block)


@contextmanager
def private_postgres(data_dir: Path, port: int, options: str = ""):
    """A PostgreSQL cluster in ``data_dir`` (on the drill's disk) on 127.0.0.1:``port``;
    ``options``: more ``-c name=value`` settings. Yields (URL, the pg_ctl command prefix)."""
    sockets = data_dir.parent / f"sockets-{port}"
    sockets.mkdir(exist_ok=True)
    shutil.chown(data_dir.parent, "postgres")
    shutil.chown(sockets, "postgres")
    as_pg = ["runuser", "-u", "postgres", "--"]
    run([*as_pg, str(PG_BIN / "initdb"), "-D", str(data_dir), "-A", "trust", "-U", "postgres",
         "--no-sync"])
    options = (f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c shared_buffers=16MB "
               f"-c max_wal_size=64MB -c min_wal_size=32MB -c fsync=on {options}")
    pg_ctl = [*as_pg, str(PG_BIN / "pg_ctl"), "-D", str(data_dir), "-o", options,
              "-l", str(data_dir.parent / f"postgres-{port}.log")]
    run([*pg_ctl, "-w", "start"])
    try:
        run([*as_pg, str(PG_BIN / "createdb"), "-h", "127.0.0.1", "-p", str(port), "attn"])
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/attn", pg_ctl
    finally:
        run([*pg_ctl, "-m", "immediate", "stop"], check=False)


class Service:
    """The service's commands against one database: ``attn-grader serve --workers 0`` for the
    web, ``attn-grader worker`` for grading, with the real grader."""

    def __init__(self, url: str, folder: Path, port: int, **settings):
        self.folder, self.port = folder, port
        self.base = f"http://127.0.0.1:{port}"
        self.namespace = f"drill_{secrets.token_hex(4)}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("ATTN_GRADER_")}
        self.env.update({
            "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1",
            "ATTN_GRADER_DATABASE_URL": url, "ATTN_GRADER_INSTANCE_PATH": str(folder / "instance"),
            "ATTN_GRADER_SECRET_KEY": secrets.token_hex(16), "ATTN_GRADER_SEED_DEMO": "false",
            "ATTN_GRADER_BROKER_URL": REDIS, "ATTN_GRADER_BROKER_NAMESPACE": self.namespace,
            "ATTN_GRADER_LOG_FORMAT": "json", "ATTN_GRADER_API_RATE_LIMIT": "100000 per minute",
            "ATTN_GRADER_LEASE_SECONDS": "20", "ATTN_GRADER_POLL_SECONDS": "1",
            **{f"ATTN_GRADER_{k}": str(v) for k, v in settings.items()}})
        self.procs: dict[str, subprocess.Popen] = {}
        self.token = ""

    def cli(self, *args, stdin: str | None = None) -> str:
        out = run([sys.executable, "-m", "grader.cli", *args], env=self.env, cwd=ROOT,
                  input=stdin)
        return out.stdout.strip()

    def prepare(self) -> None:
        self.cli("db", "upgrade")
        self.cli("users", "add", "drill@example.org")
        self.token = self.cli("users", "token", "drill@example.org")

    def start(self, name: str, *args, env: dict | None = None, wrap=()) -> subprocess.Popen:
        log = open(self.folder / f"{name}.log", "ab")
        self.procs[name] = subprocess.Popen(
            [*wrap, sys.executable, "-m", "grader.cli", *args], env={**self.env, **(env or {})},
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        return self.procs[name]

    def start_web(self) -> None:
        self.start("web", "serve", "--port", str(self.port), "--workers", "0", "--no-demo")
        wait(lambda: self.get("/healthz")[0] in (200, 503), 60, "the web to answer")

    def start_worker(self, name: str = "worker", **kw) -> subprocess.Popen:
        proc = self.start(name, "worker", "--processes", "1", "--queues", "cpu", **kw)
        wait(lambda: b"consuming" in (self.folder / f"{name}.log").read_bytes(), 180,
             f"{name} to warm up")
        return proc

    def stop(self, name: str) -> None:
        proc = self.procs.pop(name, None)
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def stop_all(self) -> None:
        for name in list(self.procs):
            self.stop(name)
        try:
            import redis

            client = redis.Redis.from_url(REDIS)
            for key in client.scan_iter(f"{self.namespace}*"):
                client.delete(key)
            client.close()
        except Exception as exc:  # Redis gone: nothing of ours to clean
            say("redis clean-up skipped:", exc)

    # -- the API -------------------------------------------------------------------------------
    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        data = json.dumps(body).encode() if body is not None else None
        self.retry_after = None
        req = urllib.request.Request(self.base + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                self.retry_after = resp.headers.get("Retry-After")
                return resp.status, _json(resp.read())
        except urllib.error.HTTPError as exc:
            self.retry_after = exc.headers.get("Retry-After")  # what a refusal tells the client
            return exc.code, _json(exc.read())
        except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
            return 0, {"error": str(exc)}

    def get(self, path: str) -> tuple[int, dict]:
        return self.request("GET", path)

    def submit(self, code: str = REFERENCE) -> tuple[int, dict]:
        return self.request("POST", "/api/v1/submissions", {"task": "sdpa", "code": code})


def _json(raw: bytes) -> dict:
    try:
        return json.loads(raw or b"{}")
    except ValueError:
        return {"body": raw[:200].decode(errors="replace")}


def wait(predicate, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except Exception:  # not up yet
            value = None
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


def database_check(url: str) -> dict:
    """Nothing half-written: every submission has its job, and each job has one result per
    grading (``done``), none for others."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.connect() as conn:
        figures = {name: conn.execute(text(sql)).scalar() for name, sql in {
            "submissions": "SELECT count(*) FROM submissions",
            "submissions_without_job": "SELECT count(*) FROM submissions s LEFT JOIN grading_jobs j "
                                       "ON j.submission_id = s.id WHERE j.id IS NULL",
            "done": "SELECT count(*) FROM grading_jobs WHERE status = 'done'",
            "failed": "SELECT count(*) FROM grading_jobs WHERE status = 'failed'",
            "results": "SELECT count(*) FROM results",
            "results_without_checks": "SELECT count(*) FROM results r WHERE NOT EXISTS "
                                      "(SELECT 1 FROM check_results c WHERE c.result_id = r.id)",
        }.items()}
    engine.dispose()
    return figures
