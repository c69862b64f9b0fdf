"""How long `attn-grader check` takes on a correct file, next to a bare `python -c "import torch"`.

    python benchmarks/check_cli.py [--repeat 5] [--task sdpa|mha] [--sandbox auto] [--json OUT]

Both are measured in the same run, interleaved, so the ratio holds on any machine. The grade
report's own timings split the CLI's time into the child's start (``load_s``) and the checks
(``checks_s``), which should cost well under a second on a CPU.
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
FILES = {"sdpa": os.path.join(ROOT, "grader", "tasks", "sdpa", "corpus", "correct", "matmul_softmax.py"),
         "mha": os.path.join(ROOT, "grader", "tasks", "mha", "corpus", "correct", "reshape_transpose.py")}


def timed(cmd: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0,):
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr[-500:]}")
    return elapsed, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--task", choices=sorted(FILES), default="sdpa")
    parser.add_argument("--sandbox", choices=["local", "auto", "strict", "none"], default="local")
    parser.add_argument("--json", dest="json_out", help="also write the numbers to this file")
    args = parser.parse_args()

    baseline, check, load, checks = [], [], [], []
    cli = [sys.executable, "-m", "grader.cli", "check", FILES[args.task], "--task", args.task,
           "--json", "--sandbox", args.sandbox]
    timed([sys.executable, "-c", "import torch"])  # warm the page cache for both
    for _ in range(args.repeat):
        baseline.append(timed([sys.executable, "-c", "import torch"])[0])
        elapsed, out = timed(cli)
        report = json.loads(out)
        assert report["passed"], "the correct file did not pass"
        check.append(elapsed)
        load.append(report["timings"]["load_s"])
        checks.append(report["timings"]["checks_s"])

    med = statistics.median
    result = {"task": args.task, "sandbox": report["sandbox"], "repeat": args.repeat,
              "import_torch_s": round(med(baseline), 3), "check_cli_s": round(med(check), 3),
              "ratio": round(med(check) / med(baseline), 2), "child_start_s": round(med(load), 3),
              "checks_s": round(med(checks), 3), "calls": report["timings"]["calls"]}
    print(f"python -c 'import torch'           {result['import_torch_s']:.2f} s (median of {args.repeat})")
    print(f"attn-grader check ({args.task}, {result['sandbox']:6s})  {result['check_cli_s']:.2f} s "
          f"= {result['ratio']:.2f}x import torch")
    print(f"  of which: child start + import {result['child_start_s']:.2f} s, "
          f"{result['calls']} calls and all checks {result['checks_s']:.2f} s")
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
