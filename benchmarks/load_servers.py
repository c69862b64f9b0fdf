"""The servers ``benchmarks/load.py`` runs against, started and removed by it.

``serve``: ``attn-grader serve`` on SQLite with its grading workers. ``scaled``: gunicorn
(``deploy/gunicorn.conf.py``) on PostgreSQL with Redis for job ids and rate limits, plus
separate ``attn-grader worker`` processes, as on several hosts. Each set-up seeds its own
database (``scripts/seed_large.py``) and leaves nothing behind: the PostgreSQL database is
dropped and the Redis keys of its namespace deleted.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Setup:
    """Servers started for one run; ``close()`` stops them and removes what they made."""

    def __init__(self, kind, args):
        self.kind, self.args = kind, args
        self.tmp = Path(tempfile.mkdtemp(prefix=f"attn-load-{kind}-"))
        self.procs: list[subprocess.Popen] = []
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.pg_name = None
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("ATTN_GRADER_")}
        self.env.update({
            "ATTN_GRADER_INSTANCE_PATH": str(self.tmp), "ATTN_GRADER_SECRET_KEY": "load-test",
            "ATTN_GRADER_SEED_DEMO": "false", "ATTN_GRADER_TRUSTED_PROXIES": "1",
            "ATTN_GRADER_LOG_LEVEL": "WARNING", "ATTN_GRADER_LOG_FORMAT": "json",
            "ATTN_GRADER_API_RATE_LIMIT": "100000 per minute",
            "ATTN_GRADER_SANDBOX": "auto", "LOAD_GRADE_SECONDS": str(args.grade_seconds),
            "PYTHONPATH": os.pathsep.join([str(ROOT), self.env.get("PYTHONPATH", "")]),
        })
        if args.grader == "fake":
            self.env["ATTN_GRADER_GRADE_FUNCTION"] = "benchmarks.load:fake_grade"
        if kind == "serve":
            self.database_url = f"sqlite:///{self.tmp / 'load.db'}"
        else:
            self.pg_name = f"attn_load_{uuid.uuid4().hex[:8]}"
            self._pg_admin(f'CREATE DATABASE "{self.pg_name}"')
            self.database_url = f"{args.pg.rsplit('/', 1)[0]}/{self.pg_name}"
            namespace = f"attn_load_{uuid.uuid4().hex[:8]}"
            self.env.update({"ATTN_GRADER_BROKER_URL": args.redis,
                             "ATTN_GRADER_BROKER_NAMESPACE": namespace,
                             "ATTN_GRADER_RATELIMIT_STORAGE_URI": args.redis_limits})
        self.env["ATTN_GRADER_DATABASE_URL"] = self.database_url

    def _pg_admin(self, sql):
        from sqlalchemy import create_engine, text

        admin = create_engine(self.args.pg, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(sql))
        admin.dispose()

    def start(self, password) -> dict:
        subprocess.run([str(BIN / "attn-grader"), "db", "upgrade"], env=self.env, check=True,
                       cwd=ROOT, stdout=subprocess.DEVNULL)
        seed = _load_seed_module()
        from web.db import get_engine

        made = seed.seed_large(get_engine(self.database_url), self.args.seed_students,
                               self.args.seed_submissions, password=password, log=lambda *_: None)
        out = open(self.tmp / "servers.log", "w")
        if self.kind == "serve":
            self.procs.append(subprocess.Popen(
                [str(BIN / "attn-grader"), "serve", "--port", str(self.port),
                 "--workers", str(self.args.workers)], env=self.env, cwd=ROOT,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True))
        else:
            web_env = {**self.env, "GUNICORN_BIND": f"127.0.0.1:{self.port}",
                       "GUNICORN_WORKERS": str(self.args.web_processes),
                       "GUNICORN_FORWARDED_ALLOW_IPS": "*"}
            self.procs.append(subprocess.Popen(
                [str(BIN / "gunicorn"), "-c", "deploy/gunicorn.conf.py", "web:create_app()"],
                env=web_env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True))
            for i in range(self.args.workers):  # two "hosts", one worker process each
                self.procs.append(subprocess.Popen(
                    [str(BIN / "attn-grader"), "worker", "--queues", "cpu", "--processes", "1"],
                    env=self.env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                    start_new_session=True))
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if requests.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return made
            except requests.RequestException:
                pass
            if any(p.poll() is not None for p in self.procs):
                break
            time.sleep(0.3)
        raise RuntimeError(f"{self.kind}: the server did not come up; see {self.tmp}/servers.log")

    def close(self):
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        from web.db import dispose_engines

        dispose_engines()
        if self.pg_name:
            self._pg_admin(f'DROP DATABASE IF EXISTS "{self.pg_name}" WITH (FORCE)')
        if self.kind == "scaled":
            import redis

            client = redis.Redis.from_url(self.args.redis)
            for key in client.scan_iter(self.env["ATTN_GRADER_BROKER_NAMESPACE"] + "*"):
                client.delete(key)
        if not self.args.keep:
            shutil.rmtree(self.tmp, ignore_errors=True)


def _load_seed_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("seed_large", ROOT / "scripts" / "seed_large.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
