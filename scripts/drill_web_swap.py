"""Web swap drill: what clients see while gunicorn is restarted on one host, bound to its port
itself (as ``deploy/systemd/attn-grader-web.service`` alone does) or handed a socket that
outlives it (``attn-grader-web.socket``: systemd socket activation).

    /work/main/.venv/bin/python scripts/drill_web_swap.py [--swaps 3]

Needs gunicorn importable (``pip install '.[deploy]'``, or ``GUNICORN_PATH`` naming a folder
that holds it). A prober asks ``/healthz`` every 20 ms throughout; each swap SIGTERMs the
running gunicorn (``deploy/gunicorn.conf.py``, the app on an SQLite database of the drill's
own) and starts a new one, as ``systemctl restart`` does. In the socket mode this script plays
systemd's part: it binds the port once and passes the socket to each gunicorn as fd 3 with
``LISTEN_FDS``/``LISTEN_PID``, so connections that arrive between two gunicorns wait in the
socket's backlog instead of being refused. Prints a JSON summary per mode: probes, refused
connections, other errors, the longest answer, and the refusal window of each swap.
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class Prober(threading.Thread):
    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url, self.stop = url, threading.Event()
        self.samples: list[tuple[float, str, float]] = []  # (time, outcome, seconds)

    def run(self) -> None:
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                with urllib.request.urlopen(self.url, timeout=60) as resp:
                    outcome = str(resp.status)
            except urllib.error.HTTPError as exc:
                outcome = str(exc.code)
            except urllib.error.URLError as exc:
                reason = getattr(exc, "reason", exc)
                outcome = "refused" if isinstance(reason, ConnectionRefusedError) else \
                    type(reason).__name__
            except (ConnectionError, TimeoutError) as exc:
                outcome = type(exc).__name__
            self.samples.append((started, outcome, time.monotonic() - started))
            self.stop.wait(0.02)


def gunicorn(env: dict, listen_fd: int | None) -> subprocess.Popen:
    command = [sys.executable, "-m", "gunicorn", "-c", "deploy/gunicorn.conf.py", "web:create_app()"]
    if listen_fd is None:
        return subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    # systemd's protocol: the sockets from fd 3 on, LISTEN_FDS of them, for LISTEN_PID only
    return subprocess.Popen(["sh", "-c", 'LISTEN_PID=$$ LISTEN_FDS=1 exec "$@"', "sh", *command],
                            env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True,
                            pass_fds=(3,), preexec_fn=lambda: os.dup2(listen_fd, 3))


def wait_healthy(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.1)
    raise TimeoutError("gunicorn did not answer")


def run_mode(mode: str, swaps: int, port: int, env: dict) -> dict:
    url = f"http://127.0.0.1:{port}/healthz"
    held = None
    if mode == "socket":
        held = socket.socket()
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        held.bind(("127.0.0.1", port))
        held.listen(128)
    env = {**env, "GUNICORN_BIND": f"127.0.0.1:{port}"}
    proc = gunicorn(env, held.fileno() if held else None)
    wait_healthy(url)
    prober = Prober(url)
    prober.start()
    swap_times = []
    try:
        for _ in range(swaps):
            time.sleep(2.0)
            began = time.monotonic()
            os.killpg(proc.pid, signal.SIGTERM)  # systemctl restart: stop, then start
            proc.wait(60)
            proc = gunicorn(env, held.fileno() if held else None)
            wait_healthy(url)
            swap_times.append((began, time.monotonic()))
        time.sleep(1.0)
    finally:
        prober.stop.set()
        prober.join(15)
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)
        if held is not None:
            held.close()
    samples = prober.samples
    failures = [s for s in samples if s[1] not in ("200",)]
    windows = []
    for began, ended in swap_times:
        inside = [s for s in failures if began <= s[0] <= ended]
        windows.append(round(inside[-1][0] + inside[-1][2] - inside[0][0], 2) if inside else 0.0)
    return {"mode": mode, "swaps": swaps, "probes": len(samples),
            "outcomes": {o: sum(1 for s in samples if s[1] == o)
                         for o in sorted({s[1] for s in samples})},
            "refused": sum(1 for s in samples if s[1] == "refused"),
            "longest_answer_s": round(max(s[2] for s in samples), 2),
            "seconds_each_swap_took": [round(e - b, 2) for b, e in swap_times],
            "failure_window_per_swap_s": windows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--swaps", type=int, default=3)
    parser.add_argument("--port", type=int, default=18761)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="drill-web-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTN_GRADER_")}
    extra = os.environ.get("GUNICORN_PATH", "")
    env.update({"PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), extra) if p),
                "PYTHONDONTWRITEBYTECODE": "1", "GUNICORN_WORKERS": "2", "GUNICORN_THREADS": "4",
                "ATTN_GRADER_DATABASE_URL": f"sqlite:///{folder / 'drill.db'}",
                "ATTN_GRADER_INSTANCE_PATH": str(folder / "instance"),
                "ATTN_GRADER_SECRET_KEY": secrets.token_hex(16), "ATTN_GRADER_SEED_DEMO": "false",
                "ATTN_GRADER_LOG_LEVEL": "WARNING"})
    subprocess.run([sys.executable, "-m", "grader.cli", "db", "upgrade"], env=env, cwd=ROOT,
                   check=True, capture_output=True)
    summary = [run_mode("bind", args.swaps, args.port, env),
               run_mode("socket", args.swaps, args.port + 1, env)]
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
