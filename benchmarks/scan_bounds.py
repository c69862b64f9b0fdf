"""What moving every analysis of a submission into a limited process costs, and how the scans scale.

    python benchmarks/scan_bounds.py [--repeat 5] [--json OUT]

Two ratios, each against a baseline measured in the same run:

- the wall time of the static analysis of every correct sdpa and sdpa_backward corpus file, over a
  bare ``python -I -c pass`` started the same way: what the limited process costs beyond starting an
  interpreter. Measured twice: as a grading does it (``bounded.analyse``: the parse and both scans
  in one process) and as it was done before (``bounded.parse`` then each ``bounded.scan`` in a
  process of its own, each parsing again);
- the CPU time of the in-process scans on alias chains of n and 4n names, reversed order (each
  alias refers to one assigned further down, the order that made the old resolver quadratic):
  linear code gives about 4x, quadratic about 16x.
"""
from __future__ import annotations

import argparse
import ast
import glob
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from grader import bounded  # noqa: E402
from grader.checks import autograd_ban, forbidden  # noqa: E402


def _least(fn, repeat):
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _chain(n):
    return "import torch\n" + "".join(f"a{i} = a{i + 1}\n" for i in range(n)) + \
        f"a{n} = torch.nn.functional\na0.scaled_dot_product_attention(1)\na0.autograd.grad(1)\n"


def _cpu(fn):
    start = time.process_time()
    fn()
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json")
    args = parser.parse_args()
    files = sorted(glob.glob(os.path.join(ROOT, "grader", "tasks", "sdpa*", "corpus", "correct", "*.py")))
    sources = [open(f, encoding="utf-8").read() for f in files]
    bare = _least(lambda: subprocess.run([sys.executable, "-I", "-c", "pass"], check=True), args.repeat)
    one = [_least(lambda s=s: bounded.analyse(s, bounded.SCANS), args.repeat) for s in sources]
    three = [_least(lambda s=s: (bounded.parse(s), bounded.scan(s, "forbidden"), bounded.scan(s, "autograd")),
                    args.repeat) for s in sources]
    mean, mean_three = sum(one) / len(one), sum(three) / len(three)
    growth = {}
    for n in (5_000, 20_000):
        tree = ast.parse(_chain(n))
        growth[n] = min(_cpu(lambda: (forbidden.scan_tree(tree), autograd_ban.scan_tree(tree)))
                        for _ in range(max(1, args.repeat // 2)))
    out = {"files": len(files), "bare_interpreter_s": round(bare, 4), "analysis_mean_s": round(mean, 4),
           "analysis_over_bare": round(mean / bare, 2),
           "three_processes_mean_s": round(mean_three, 4), "three_processes_over_bare": round(mean_three / bare, 2),
           "scan_cpu_s": {str(n): round(t, 4) for n, t in growth.items()},
           "scan_growth_4x_names": round(growth[20_000] / growth[5_000], 2)}
    print(json.dumps(out, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
