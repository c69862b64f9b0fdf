"""Issue 14's table: every row as a ratio to a limit measured in the same run.

    python benchmarks/grading_limits.py                       # 150 submissions, 10 clients
    python benchmarks/grading_limits.py --count 40 --repeat 3 # quicker (make bench)
    python benchmarks/grading_limits.py --scaled --rounds 3   # also gunicorn + PostgreSQL + Redis,
                                                              # three bursts of each
    python benchmarks/grading_limits.py --json out.json

The two limits, measured first:

- ``one-core grade``: ``grade_source`` of the corpus's textbook sdpa file through a warm
  sandbox (strict where this host has it, else auto), in a process pinned to one core.
  No service can grade faster than this per core: its 2-core capacity is
  ``cores x 60 / one-core grade`` submissions a minute.
- ``import torch``: a bare ``python -c "import torch"``, what a student's own machine pays
  before anything else.

Then each row, with its ratio: the same grading with every core free; a burst of
``--count`` submissions from ``--clients`` API clients on ``attn-grader serve`` (SQLite,
``--workers`` workers), each client learning its results by long polling; one submission
on the idle service, submit to result (``--idle-repeat`` of them, each after a pause: median
and p90); and ``attn-grader check`` of the same file, interleaved with the bare import.

The speed of a shared machine drifts by a tenth within minutes, so the one-core limit is
measured again after each service's burst: every burst is set against the limit runs just
before and just after it. With ``--rounds N`` each service is started N times, one burst each,
and the median burst is shown with every burst's ratio beside it.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
FILE = ROOT / "grader" / "tasks" / "sdpa" / "corpus" / "correct" / "matmul_softmax.py"
IDLE_PAUSE = 0.5  # seconds between the idle row's submissions
med = statistics.median


def p90(values: list[float]) -> float:
    return sorted(values)[round(0.9 * (len(values) - 1))]


def grade_loop(n: int, cpus: list[int] | None, threads: int) -> None:
    """Child mode: grade FILE n times (after a warm-up) and print the times as JSON."""
    if cpus is not None:
        os.sched_setaffinity(0, cpus)
    import torch

    torch.set_num_threads(threads)
    from grader.grading import grade_source
    from grader.sandbox.wall import strict_problems

    level = "strict" if not strict_problems() else "auto"
    source = FILE.read_bytes()
    for _ in range(2):
        grade_source(source, "sdpa", seed=1, sandbox=level)
    times, checks = [], []
    for _ in range(n):
        start = time.perf_counter()
        report = grade_source(source, "sdpa", seed=1, sandbox=level)
        times.append(time.perf_counter() - start)
        checks.append(report.timings["checks_s"])
        assert report.score == report.max_score, "the correct file did not pass"
    print(json.dumps({"times": times, "checks": checks, "sandbox": level}))


def measure_grading(n: int, cpus: list[int] | None, threads: int) -> dict:
    argv = [sys.executable, __file__, "--grade-loop", str(n), "--threads", str(threads)]
    if cpus is not None:
        argv += ["--cpus", ",".join(map(str, cpus))]
    out = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def wall(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, capture_output=True, check=True)
    return time.perf_counter() - start


def start_service(tmp: Path, workers: int, port: int, settings: dict | None = None):
    """``serve`` on a fresh SQLite database; ``settings``: more ATTN_GRADER_* variables."""
    from service_throughput import http_json, prepare

    url = f"sqlite:///{tmp / 'bench.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTN_GRADER_")}
    env.update(ATTN_GRADER_DATABASE_URL=url, ATTN_GRADER_INSTANCE_PATH=str(tmp),
               ATTN_GRADER_SEED_DEMO="false", ATTN_GRADER_API_RATE_LIMIT="100000 per minute",
               ATTN_GRADER_PAGES="false", ATTN_GRADER_LOG_LEVEL="WARNING",
               ATTN_GRADER_WAITING_REQUESTS="32", **(settings or {}))
    os.environ.update({k: v for k, v in env.items() if k.startswith("ATTN_GRADER_")})
    token = prepare(url)
    proc = subprocess.Popen([sys.executable, "-m", "grader.cli", "serve", "--port", str(port),
                             "--workers", str(workers), "--threads", "48"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = f"http://127.0.0.1:{port}"
    for _ in range(240):
        try:
            http_json("GET", f"{server}/api/v1/tasks", token)
            return proc, server, token
        except OSError:
            time.sleep(0.25)
    proc.kill()
    raise SystemExit("the service did not start")


def submit_and_learn(server: str, token: str, code: str) -> tuple[int, float]:
    """Submit, then hold a status request until graded; (id, seconds to the result)."""
    from service_throughput import http_json

    start = time.perf_counter()
    sid = http_json("POST", f"{server}/api/v1/submissions", token,
                    {"task": "sdpa", "code": code})["id"]
    while http_json("GET", f"{server}/api/v1/submissions/{sid}?wait=60", token)["status"] \
            not in ("done", "failed"):
        pass
    return sid, time.perf_counter() - start


def measure_service(kind: str, args, code: str, port: int) -> tuple[dict, list[float]]:
    """The burst, then idle submissions, on ``serve`` or on the scaled stack."""
    setup = None
    if kind == "serve":
        tmp = Path(tempfile.mkdtemp(prefix="attn-limits-"))
        proc, server, token = start_service(tmp, args.workers, port)
    else:
        from types import SimpleNamespace

        from load_servers import Setup
        from service_throughput import prepare

        setup = Setup("scaled", SimpleNamespace(
            grade_seconds=0.0, grader="real", pg=args.pg, redis=args.redis,
            redis_limits=args.redis_limits, workers=args.workers, web_processes=2,
            seed_students=1, seed_submissions=0, keep=False))
        # Its workers are separate `attn-grader worker` processes on this one host: give
        # each its share of the cores by hand (one host, one `worker --processes N`, does it).
        setup.env.update(ATTN_GRADER_TORCH_THREADS=str(max(1, len(os.sched_getaffinity(0))
                                                            // args.workers)),
                         ATTN_GRADER_WAITING_REQUESTS="16", GUNICORN_THREADS="32")
        setup.start("attention-is-all-you-need")
        server, token = setup.url, prepare(setup.database_url)
    try:
        # Each worker warms up when it starts (one grading off the clock, its sandbox's fork
        # server and first child); these wait for that before anything is timed.
        for _ in range(args.workers):
            submit_and_learn(server, token, code)
        load = burst(server, token, code, args.count, args.clients)
        idle = []
        for _ in range(args.idle_repeat):
            time.sleep(IDLE_PAUSE)  # not timed: the service idle again before each one
            idle.append(submit_and_learn(server, token, code)[1])
    finally:
        if setup is not None:
            setup.close()
        else:
            proc.terminate()
            proc.wait(90)
    return load, idle


def burst(server: str, token: str, code: str, count: int, clients: int) -> dict:
    """Every client sends its share at once, then long-polls each of its submissions."""
    from service_throughput import http_json, percentile

    sent: dict[int, float] = {}
    learned: dict[int, float] = {}
    lock = threading.Lock()

    def client(share: int) -> None:
        mine = []
        for _ in range(share):
            start = time.perf_counter()
            sid = http_json("POST", f"{server}/api/v1/submissions", token,
                            {"task": "sdpa", "code": code})["id"]
            mine.append(sid)
            with lock:
                sent[sid] = start
        for sid in mine:
            while http_json("GET", f"{server}/api/v1/submissions/{sid}?wait=60", token)[
                    "status"] not in ("done", "failed"):
                pass
            with lock:
                learned[sid] = time.perf_counter()

    shares = [count // clients + (i < count % clients) for i in range(clients)]
    began = time.perf_counter()
    threads = [threading.Thread(target=client, args=(s,)) for s in shares if s]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = max(learned.values()) - began
    views = [http_json("GET", f"{server}/api/v1/submissions/{sid}", token) for sid in sent]
    grading = [v["timings"]["grading_seconds"] for v in views if v["timings"]["grading_seconds"]]
    latency = [learned[s] - sent[s] for s in sent]
    # Claimed -> stored, less grade_source itself: the worker's own cost per job.
    around = [v["timings"]["grading_seconds"] - v["timings"]["grader"]["total_s"] for v in views
              if v["timings"]["grading_seconds"] and (v["timings"]["grader"] or {}).get("total_s")]
    return {"per_minute": count / elapsed * 60, "grading_p50": med(grading),
            "around_grading_p50": med(around) if around else None,
            "latency_p50": percentile(latency, 50), "latency_p95": percentile(latency, 95),
            "full_marks": sum(v["status"] == "done" and v["score"] == v["max_score"] for v in views),
            "count": count, "lost": count - len(views),
            "graded_twice": sum(v["timings"]["attempts"] != 1 for v in views)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=150, help="submissions in the burst")
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5, help="repetitions of the short rows")
    parser.add_argument("--idle-repeat", type=int, default=20,
                        help="submissions of the idle row, one at a time (median and p90)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="bursts per service, each between two limit runs (the median shown)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--scaled", action="store_true",
                        help="also the burst on gunicorn + PostgreSQL + Redis + attn-grader worker")
    parser.add_argument("--pg", default="postgresql+psycopg://postgres@127.0.0.1:5432/test",
                        help="an existing PostgreSQL database; a scratch one is created beside it")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/12")
    parser.add_argument("--redis-limits", default="redis://127.0.0.1:6379/11")
    parser.add_argument("--grade-loop", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--cpus", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.grade_loop is not None:
        grade_loop(args.grade_loop, [int(c) for c in args.cpus.split(",")] if args.cpus else None,
                   args.threads)
        return 0

    if args.scaled and not (Path(sys.executable).parent / "gunicorn").exists():
        parser.error("--scaled runs gunicorn, which is not installed in this environment: "
                     "`make bench` installs it, or `pip install -e '.[server,deploy]'`")
    cores = sorted(os.sched_getaffinity(0))
    code = FILE.read_text()
    print(f"machine: {len(cores)} usable cores, load average {os.getloadavg()[0]:.1f}; "
          f"file {FILE.name}", flush=True)

    def one_core() -> dict:
        return measure_grading(args.repeat * 3, cpus=cores[:1], threads=1)

    # The first limit run; each service row below is followed by another, so every burst has
    # one limit run just before it and one just after (the bare import: around the check
    # runs, and again at the end).
    limit_runs = [one_core()]
    bare = []

    # The rows.
    free = measure_grading(args.repeat * 3, cpus=None, threads=len(cores))
    check_cmd = [sys.executable, "-m", "grader.cli", "check", str(FILE), "--task", "sdpa", "--json"]
    checks = []
    for _ in range(args.repeat):  # interleaved with the bare import, so both see the same load
        checks.append(wall(check_cmd))
        bare.append(wall([sys.executable, "-c", "import torch"]))
    check_import = med(bare)  # the check row's limit: timed beside it

    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    kinds = ["serve"] + (["scaled"] if args.scaled else [])
    bursts: dict[str, list[dict]] = {kind: [] for kind in kinds}
    idle: dict[str, list[float]] = {kind: [] for kind in kinds}
    workers = min(args.workers, len(cores))
    for round_ in range(args.rounds):
        for kind in kinds:
            load, idle_times = measure_service(kind, args, code, port)
            limit_runs.append(one_core())
            # The limit of this burst's own stretch of time: on a shared machine the speed
            # drifts by a tenth within minutes, so each burst is set against the limit runs
            # just before and just after it.
            around = limit_runs[-2]["times"] + limit_runs[-1]["times"]
            load["limit_s"] = med(around)
            load["limit_per_minute"] = workers * 60 / load["limit_s"]
            load["ratio"] = load["per_minute"] / load["limit_per_minute"]
            bursts[kind].append(load)
            idle[kind] += idle_times
            print(f"round {round_ + 1}, {kind}: {load['per_minute']:.0f} graded/min = "
                  f"{load['ratio']:.2f} of the limit ({load['limit_s'] * 1000:.0f} ms around it)",
                  flush=True)
    bare += [wall([sys.executable, "-c", "import torch"]) for _ in range(args.repeat)]
    limit_import = med(bare)  # the idle rows' limit: timed before and after the service rows
    limit_grade = med([t for run in limit_runs for t in run["times"]])
    run_medians = [med(run["times"]) for run in limit_runs]
    all_checks = [c for run in limit_runs for c in run["checks"]]

    def spread(values: list[float]) -> str:
        return "" if len(values) < 2 else \
            f"; {len(values)} bursts: " + ", ".join(f"{v:.2f}" for v in values)

    def median_burst(kind: str) -> dict:
        ordered = sorted(bursts[kind], key=lambda b: b["ratio"])
        return ordered[(len(ordered) - 1) // 2]  # the lower median of an even count

    load = median_burst("serve")
    idle_serve = idle["serve"]
    rows = [
        ("grade_source, warm, pinned to one core (limit)", f"{limit_grade * 1000:.0f} ms",
         f"checks {med(all_checks) * 1000:.0f} ms + sandbox and inputs "
         f"{(limit_grade - med(all_checks)) * 1000:.0f} ms ({limit_runs[0]['sandbox']}); "
         f"{len(limit_runs)} runs around the service rows, their medians "
         f"{min(run_medians) * 1000:.0f}-{max(run_medians) * 1000:.0f} ms", 1.0),
        ("the same, every core free", f"{med(free['times']) * 1000:.0f} ms", "vs one-core grade",
         med(free["times"]) / limit_grade),
        (f"burst: {args.count} submissions, {args.clients} API clients, serve, SQLite, "
         f"{args.workers} workers", f"{load['per_minute']:.0f} graded/min",
         f"limit {load['limit_per_minute']:.0f}/min; grading p50 "
         f"{load['grading_p50'] * 1000:.0f} ms = {load['grading_p50'] / load['limit_s']:.2f}x "
         f"one-core grade (claim and store {(load['around_grading_p50'] or 0) * 1000:.0f} ms "
         f"of it); submit->result p50 {load['latency_p50']:.2f} s, p95 {load['latency_p95']:.2f} s"
         f"{spread([b['ratio'] for b in bursts['serve']])}", load["ratio"]),
    ]
    if args.scaled:
        sload, sidle = median_burst("scaled"), idle["scaled"]
        rows.append((f"the burst on gunicorn + PostgreSQL + Redis + {args.workers} attn-grader "
                     f"worker", f"{sload['per_minute']:.0f} graded/min",
                     f"limit {sload['limit_per_minute']:.0f}/min; grading p50 "
                     f"{sload['grading_p50'] * 1000:.0f} ms; submit->result p50 "
                     f"{sload['latency_p50']:.2f} s; idle submit->result {med(sidle) * 1000:.0f} ms "
                     f"(p90 {p90(sidle) * 1000:.0f}) = {med(sidle) / limit_import:.2f}x import torch"
                     f"{spread([b['ratio'] for b in bursts['scaled']])}", sload["ratio"]))
    rows += [
        ("one submission on the idle service, submit->result", f"{med(idle_serve) * 1000:.0f} ms",
         f"vs import torch; p90 {p90(idle_serve) * 1000:.0f} ms = "
         f"{p90(idle_serve) / limit_import:.2f}x ({len(idle_serve)} submissions); one-core "
         f"grade = {limit_grade / limit_import:.2f}x", med(idle_serve) / limit_import),
        ("attn-grader check (local pre-check)", f"{med(checks):.2f} s",
         f"vs import torch {check_import:.2f} s (timed beside it)", med(checks) / check_import),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"\n{'what':<{width}}  {'measured':>16}  {'ratio':>6}  against")
    for what, value, against, ratio in rows:
        print(f"{what:<{width}}  {value:>16}  {ratio:6.2f}  {against}")
    every = [b for kind in kinds for b in bursts[kind]]
    print(f"\nbursts: {sum(b['full_marks'] for b in every)}/{sum(b['count'] for b in every)} "
          f"at full marks, {sum(b['lost'] for b in every)} lost, "
          f"{sum(b['graded_twice'] for b in every)} graded more than once; load average now "
          f"{os.getloadavg()[0]:.1f}")
    if args.json:
        args.json.write_text(json.dumps({
            "limit_grade_s": limit_grade, "limit_runs_s": run_medians,
            "limit_import_torch_s": limit_import, "grade_free_s": med(free["times"]),
            "bursts": bursts, "idle_submit_result_s": med(idle_serve),
            "idle_submit_result_p90_s": p90(idle_serve), "idle_samples": idle,
            "check_s": med(checks), "check_import_torch_s": check_import,
            "rows": [(w, v, r) for w, v, _, r in rows]}, indent=2))
    ok = all(b["full_marks"] == b["count"] and b["lost"] == 0 for b in every)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
