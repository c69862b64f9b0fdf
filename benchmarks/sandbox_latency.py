"""What the sandbox costs: one correct ``sdpa`` submission graded through each isolation path.

    python benchmarks/sandbox_latency.py            # 7 repetitions of each row
    python benchmarks/sandbox_latency.py -n 15 --json results.json

Rows, all measured in this one run (medians, with min and max):

- ``python -c "import torch"``: a fresh interpreter, the floor of any design that starts one.
- ``sandbox only (strict)``: open a strict SandboxSession, import a trivial file, one tiny call,
  close: forking, namespaces, root, cgroup, seccomp and teardown; the per-submission
  overhead the issue targets (< 100 ms).
- ``sandbox only (strict, pre-warmed worker)``: the same through a worker forked and walled in
  before the submission arrived (the GPU path; on CPU as in a grading worker).
- ``sandbox only (plain subprocess)``: the same through a fresh interpreter (``none``).
- ``grade sdpa, strict (warm)``: the full ``grade_source`` of a correct submission through
  the warm zygote.
- ``grade sdpa, plain fresh subprocess``: the same grading, a fresh interpreter per submission.
- ``grade sdpa, checks only``: the same grading's check time (``timings['checks_s']``), that
  is the grader's own work, which no sandbox can remove.

The first strict row also starts the zygote (reported separately as a one-off).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

with open(os.path.join(ROOT, "grader", "tasks", "sdpa", "corpus", "correct", "matmul_softmax.py"),
          encoding="utf-8") as _f:
    CORRECT = _f.read()  # the textbook implementation the other benchmarks grade too
TRIVIAL = "def scaled_dot_product_attention(q, k, v, *args, **kwargs):\n    return q\n"


def measure(fn, n: int, pause: float = 0.0) -> dict:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
        time.sleep(pause)  # not timed: lets a pre-warmed pool refill, as between real submissions
    return {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times), "n": n}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=7, help="repetitions per row (default 7)")
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args()

    import torch
    from grader.grading import grade_source
    from grader.sandbox import SandboxSession, pool
    from grader.sandbox.wall import strict_problems

    problems = strict_problems()
    if problems:
        print("strict sandbox unavailable here: " + "; ".join(problems), file=sys.stderr)
        return 2
    q = torch.randn(2, 4, 16, 32)

    def sandbox_only(level):
        def run():
            with SandboxSession(TRIVIAL, "scaled_dot_product_attention", level=level) as s:
                assert s.call(q, q, q).ok
        return run

    def grade(level, sink=None):
        def run():
            report = grade_source(CORRECT, "sdpa", sandbox=level, seed=1)
            assert report.score == report.max_score, [c.message for c in report.checks if not c.passed]
            if sink is not None:
                sink.append(report.timings.get("checks_s", 0.0))
        return run

    rows = {}
    start = time.perf_counter()
    sandbox_only("strict")()  # starts (and probes) the zygote once
    zygote_start = time.perf_counter() - start
    rows['python -c "import torch"'] = measure(
        lambda: subprocess.run([sys.executable, "-c", "import torch"], check=True), args.n)
    rows["sandbox only (strict, warm zygote)"] = measure(sandbox_only("strict"), args.n)
    pool.prewarm_cpu(True)  # as a grading worker does (SANDBOX_PREWARM)
    sandbox_only("strict")()  # starts the pool
    rows["sandbox only (strict, pre-warmed worker)"] = measure(sandbox_only("strict"), args.n, pause=0.3)
    pool.prewarm_cpu(False)
    rows["sandbox only (plain fresh subprocess)"] = measure(sandbox_only("none"), args.n)
    checks = []
    rows["grade sdpa, strict (warm zygote)"] = measure(grade("strict", checks), args.n)
    rows["grade sdpa, plain fresh subprocess"] = measure(grade("none"), args.n)
    rows["grade sdpa, checks only (grader's own work)"] = {
        "median_s": statistics.median(checks), "min_s": min(checks), "max_s": max(checks), "n": len(checks)}

    width = max(map(len, rows))
    print(f"{'row':<{width}}  {'median':>9}  {'min':>9}  {'max':>9}")
    for name, r in rows.items():
        print(f"{name:<{width}}  {r['median_s'] * 1000:7.1f}ms  {r['min_s'] * 1000:7.1f}ms  {r['max_s'] * 1000:7.1f}ms")
    strict, plain = rows["grade sdpa, strict (warm zygote)"], rows["grade sdpa, plain fresh subprocess"]
    overhead = rows["sandbox only (strict, warm zygote)"]["median_s"]
    print(f"\nzygote start-up (once per worker process): {zygote_start:.2f} s")
    print(f"strict sandbox overhead per submission: {overhead * 1000:.0f} ms (target < 100 ms)")
    print(f"grading: strict warm / plain fresh subprocess = {strict['median_s'] / plain['median_s']:.2f}x; "
          f"strict warm minus checks = {(strict['median_s'] - rows[list(rows)[-1]]['median_s']) * 1000:.0f} ms")
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "zygote_start_s": zygote_start, "loadavg": os.getloadavg()}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
