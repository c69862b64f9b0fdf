"""`make bench`: the quick benchmarks, one after another, each against its own baseline.

    python benchmarks/run_all.py            # issue 14's table, CLI, sandbox, service (about 4 minutes)
    python benchmarks/run_all.py --full     # the table with its 150-submission burst (also on
                                            # gunicorn + PostgreSQL + Redis), the
                                            # 200-submission burst, the load test and
                                            # the idle row's A/B (idle_latency.py)

Every script prints its own table; this runner only chooses sizes that fit a laptop and
stops at the first script that fails. The GPU checks (gpu_check.py, gpu_sandbox_check.py)
are separate: run them on a GPU host.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

QUICK = [
    # Each row of issue 14's table as a ratio to the limits measured in the same run.
    ["grading_limits.py", "--count", "40", "--repeat", "3"],
    ["check_cli.py", "--repeat", "3"],
    ["sandbox_latency.py", "-n", "5"],
    ["at_scale_margin.py", "--repeat", "3"],   # grad.at_scale's budget against honest code and differences
    ["scan_bounds.py", "--repeat", "3"],       # the limited analysis process over a bare interpreter; scan growth
    ["service_throughput.py", "--count", "40", "--clients", "10"],
]
FULL = [
    ["grading_limits.py", "--count", "150", "--clients", "10", "--repeat", "5", "--scaled"],
    ["service_throughput.py", "--count", "200", "--clients", "20"],
    ["load.py", "--setup", "serve", "--students", "20", "--duration", "45"],
    # The idle row, with and without the workers' pre-warmed sandbox children, interleaved.
    ["idle_latency.py", "--rounds", "4", "--per-round", "8"],
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="also the long runs")
    args = parser.parse_args()
    for script, *options in QUICK + (FULL if args.full else []):
        print(f"\n=== {script} {' '.join(options)}", flush=True)
        started = time.monotonic()
        code = subprocess.call([sys.executable, str(HERE / script), *options])
        print(f"=== {script}: exit {code} after {time.monotonic() - started:.0f} s", flush=True)
        if code:
            return code
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
