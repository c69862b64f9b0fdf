"""`make bench`: the quick benchmarks, one after another, each against its own baseline.

    python benchmarks/run_all.py            # CLI, sandbox and service (about 3 minutes)
    python benchmarks/run_all.py --full     # adds the 200-submission burst and the load test

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
    ["check_cli.py", "--repeat", "3"],
    ["sandbox_latency.py", "-n", "5"],
    ["service_throughput.py", "--count", "40", "--clients", "10"],
]
FULL = [
    ["service_throughput.py", "--count", "200", "--clients", "20"],
    ["load.py", "--setup", "serve", "--students", "20", "--duration", "45"],
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
