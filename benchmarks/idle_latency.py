"""Issue 14's idle row, A/B: one submission at a time on an idle ``serve``, with and without
the workers' pre-warmed sandbox children, in interleaved rounds on the same machine.

    python benchmarks/idle_latency.py                   # 4 rounds x 2 settings x 8 submissions
    python benchmarks/idle_latency.py --rounds 6 --per-round 10 --json out.json

Each round starts a fresh ``serve`` (SQLite, 2 workers) per setting, waits for both workers
(a concurrent pair of submissions, twice), then sends ``--per-round`` submissions of the
textbook sdpa file one at a time, a pause apart, each learned by long polling. A bare
``python -c "import torch"`` is timed after each service, so every ratio has its limit
from the same stretch of time. Per setting: median and p90 of submit->result, their ratio to
the import, and where the time went (medians): queued -> claimed, claimed -> stored,
``grade_source`` itself and its load (sandbox child and import of the file), and the rest
(the HTTP requests and the wake-ups of the waiting request).
"""
from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grading_limits import FILE, IDLE_PAUSE, p90, start_service, submit_and_learn, wall  # noqa: E402
from service_throughput import http_json  # noqa: E402

SETTINGS = {"pre-warmed child": {"ATTN_GRADER_SANDBOX_PREWARM": "true"},
            "child set up after the claim": {"ATTN_GRADER_SANDBOX_PREWARM": "false"}}
med = statistics.median


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def one_round(settings: dict, per_round: int, code: str) -> list[dict]:
    tmp = Path(tempfile.mkdtemp(prefix="attn-idle-"))
    proc, server, token = start_service(tmp, 2, free_port(), settings)
    try:
        for _ in range(2):  # both workers warm and idle before anything is timed
            pair = [threading.Thread(target=submit_and_learn, args=(server, token, code))
                    for _ in range(2)]
            for t in pair:
                t.start()
            for t in pair:
                t.join()
        samples = []
        for _ in range(per_round):
            time.sleep(IDLE_PAUSE)
            sid, seconds = submit_and_learn(server, token, code)
            view = http_json("GET", f"{server}/api/v1/submissions/{sid}", token)
            t = view["timings"]
            assert view["status"] == "done" and view["score"] == view["max_score"], view["status"]
            samples.append({"total": seconds, "wait": t["wait_seconds"],
                            "grading": t["grading_seconds"], "grader": t["grader"]["total_s"],
                            "load": t["grader"]["load_s"], "rest": seconds - t["total_seconds"]})
        return samples
    finally:
        proc.terminate()
        proc.wait(90)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--per-round", type=int, default=8)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    code = FILE.read_text()
    samples = {name: [] for name in SETTINGS}
    imports = []
    for _ in range(args.rounds):
        for name, settings in SETTINGS.items():
            samples[name] += one_round(settings, args.per_round, code)
            imports.append(wall([sys.executable, "-c", "import torch"]))
    limit = med(imports)
    print(f"bare import torch: median {limit * 1000:.0f} ms of {len(imports)}")
    print(f"{'setting':<30} {'n':>3} {'median':>8} {'p90':>8} {'ratio':>6} {'p90 ratio':>9}  "
          "queued->claimed  claimed->stored  grade_source  its load  rest (HTTP, wake-ups)")
    for name, rows in samples.items():
        total = [r["total"] for r in rows]
        parts = "  ".join(f"{med(r[k] for r in rows) * 1000:13.0f}ms"
                          for k in ("wait", "grading", "grader", "load", "rest"))
        print(f"{name:<30} {len(rows):>3} {med(total) * 1000:6.0f}ms {p90(total) * 1000:6.0f}ms "
              f"{med(total) / limit:6.3f} {p90(total) / limit:9.3f}  {parts}")
    if args.json:
        args.json.write_text(json.dumps({"import_torch_s": imports, "samples": samples}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
