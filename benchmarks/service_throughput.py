"""Throughput and latency of the grading service under a burst of submissions.

Starts `attn-grader serve` on a fresh database, sends a burst of submissions of one file from
concurrent clients through the JSON API, and waits until every one is graded. Reports
submissions per minute and the p50/p95 submit-to-result latency, next to the baseline: the
wall time of a bare `attn-grader check` of the same file, measured in the same run.

    python benchmarks/service_throughput.py                      # 200 submissions, real grader
    python benchmarks/service_throughput.py --count 30 --workers 2
    python benchmarks/service_throughput.py --grader instant     # dispatch overhead only
    python benchmarks/service_throughput.py \
        --database-url postgresql+psycopg://postgres@127.0.0.1/bench   # an empty database

`--grader instant` swaps the grader for one that answers at once (``instant_grade`` below),
so what is left is the service's own cost: HTTP, database, claims and result writes.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_FILE = ROOT / "grader" / "tasks" / "sdpa" / "corpus" / "correct" / "matmul_softmax.py"


def instant_grade(code, task, **_):
    """A grader that costs nothing, to measure the service alone."""
    return {"task": task, "score": 1, "max_score": 1, "passed": True, "error": None,
            "checks": [{"id": "instant", "passed": True, "points": 1, "max_points": 1,
                        "message": "", "details": {}}],
            "grader_version": "instant", "sandbox": "none", "warnings": [], "timings": {}}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def time_check(file: Path, task: str, sandbox: str, runs: int) -> list[float]:
    """Wall seconds of `attn-grader check FILE`, a fresh process each run, as a student's."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "grader.cli", "check", str(file), "--task", task,
                        "--json", "--sandbox", sandbox], cwd=ROOT, capture_output=True, check=False)
        times.append(time.perf_counter() - start)
    return times


def prepare(url: str) -> str:
    """Migrate the database and return an API token for a fresh student."""
    from web.auth import issue_token
    from web.db import get_engine, session_factory, upgrade
    from web.services.courses import ensure_default_course
    from web.services.users import add_user, find_user

    upgrade(url)
    with session_factory(get_engine(url))() as session:
        ensure_default_course(session)
        email = "bench@example.org"
        user = find_user(session, email) or add_user(session, email, "student")
        token = issue_token(session, user, "benchmark")
        session.commit()
    return token


def http_json(method: str, url: str, token: str, body: dict | None = None) -> dict:
    import urllib.request

    data = json.dumps(body).encode() if body else None
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    req = urllib.request.Request(url, method=method, data=data, headers=headers)
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


def wait_done(server: str, token: str, ids: set[int], done_at: dict, timeout: float) -> None:
    """Poll the API until every id is graded; records the client-side time each was seen done."""
    deadline = time.monotonic() + timeout
    pending = set(ids)
    while pending:
        if time.monotonic() > deadline:
            raise SystemExit(f"{len(pending)} submissions not graded after {timeout:.0f} s")
        listing = http_json("GET", f"{server}/api/v1/submissions?limit=500", token)["submissions"]
        now = time.perf_counter()
        for row in listing:
            if row["id"] in pending and row["status"] in ("done", "failed"):
                done_at[row["id"]] = now
                pending.discard(row["id"])
        time.sleep(0.2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=200, help="submissions in the burst")
    parser.add_argument("--clients", type=int, default=20, help="concurrent submitting clients")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--file", type=Path, default=DEFAULT_FILE)
    parser.add_argument("--task", default="sdpa")
    parser.add_argument("--sandbox", default="auto", choices=["auto", "strict", "none"])
    parser.add_argument("--grader", default="real", choices=["real", "instant"])
    parser.add_argument("--database-url", default=None, help="default: SQLite in a temp folder")
    parser.add_argument("--baseline-runs", type=int, default=3)
    parser.add_argument("--port", type=int, default=5077)
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args()
    code = args.file.read_text()

    tmp = Path(tempfile.mkdtemp(prefix="attn-bench-"))
    url = args.database_url or f"sqlite:///{tmp / 'bench.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTN_GRADER_")}
    env.update(ATTN_GRADER_DATABASE_URL=url, ATTN_GRADER_INSTANCE_PATH=str(tmp),
               ATTN_GRADER_SANDBOX=args.sandbox, ATTN_GRADER_SEED_DEMO="false",
               ATTN_GRADER_API_RATE_LIMIT="100000 per minute", ATTN_GRADER_PAGES="false",
               ATTN_GRADER_LOG_LEVEL="WARNING")
    if args.grader == "instant":
        env["ATTN_GRADER_GRADE_FUNCTION"] = "service_throughput:instant_grade"
        env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent), str(ROOT)])
    os.environ.update({k: v for k, v in env.items() if k.startswith("ATTN_GRADER_")})

    print(f"baseline: `attn-grader check {args.file.name} --task {args.task}` "
          f"x{args.baseline_runs}")
    baseline = statistics.median(time_check(args.file, args.task, args.sandbox, args.baseline_runs))
    token = prepare(url)
    server = f"http://127.0.0.1:{args.port}"
    proc = subprocess.Popen([sys.executable, "-m", "grader.cli", "serve", "--port", str(args.port),
                             "--workers", str(args.workers)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(120):
            try:
                http_json("GET", f"{server}/api/v1/tasks", token)
                break
            except OSError:
                time.sleep(0.5)
        # Warm-up: one submission per worker (sandbox start-up), left out of the numbers.
        warm = {http_json("POST", f"{server}/api/v1/submissions", token,
                          {"task": args.task, "code": code})["id"] for _ in range(args.workers)}
        wait_done(server, token, warm, {}, timeout=600)

        submitted_at: dict[int, float] = {}
        lock = threading.Lock()

        def send(_):
            start = time.perf_counter()
            sid = http_json("POST", f"{server}/api/v1/submissions", token,
                            {"task": args.task, "code": code})["id"]
            with lock:
                submitted_at[sid] = start

        print(f"burst: {args.count} submissions from {args.clients} clients, "
              f"{args.workers} workers, grader {args.grader}, {url.split(':')[0]}")
        burst_start = time.perf_counter()
        with ThreadPoolExecutor(args.clients) as pool:
            list(pool.map(send, range(args.count)))
        accepted = time.perf_counter() - burst_start
        done_at: dict[int, float] = {}
        wait_done(server, token, set(submitted_at), done_at, timeout=3600)
        elapsed = max(done_at.values()) - burst_start

        views = [http_json("GET", f"{server}/api/v1/submissions/{sid}", token)
                 for sid in submitted_at]
    finally:
        proc.terminate()
        proc.wait(60)

    client_latency = [done_at[s] - submitted_at[s] for s in submitted_at]
    server_latency = [v["timings"]["total_seconds"] for v in views if v["timings"]["total_seconds"]]
    grading = [v["timings"]["grading_seconds"] for v in views if v["timings"]["grading_seconds"]]
    attempts = [v["timings"]["attempts"] for v in views]
    results = {
        "count": args.count, "clients": args.clients, "workers": args.workers,
        "grader": args.grader, "database": url.split(":")[0], "file": args.file.name,
        "baseline_check_seconds": round(baseline, 3),
        "accept_seconds": round(accepted, 3),
        "submissions_per_minute": round(args.count / elapsed * 60, 1),
        "latency_p50_seconds": round(percentile(client_latency, 50), 3),
        "latency_p95_seconds": round(percentile(client_latency, 95), 3),
        "server_latency_p50_seconds": round(percentile(server_latency, 50), 3),
        "server_latency_p95_seconds": round(percentile(server_latency, 95), 3),
        "grading_p50_seconds": round(percentile(grading, 50), 3) if grading else None,
        "failed": sum(v["status"] != "done" for v in views),
        "graded_more_than_once": sum(a != 1 for a in attempts),
    }
    results["p50_over_baseline"] = round(results["latency_p50_seconds"] / baseline, 2)
    results["p95_over_baseline"] = round(results["latency_p95_seconds"] / baseline, 2)
    # A student running `check` serially gets 60/baseline grades a minute per process.
    results["throughput_over_serial_check"] = round(
        results["submissions_per_minute"] / (60 / baseline), 2)
    width = max(map(len, results))
    for key, value in results.items():
        print(f"{key:<{width}}  {value}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0 if results["failed"] == 0 and results["graded_more_than_once"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
