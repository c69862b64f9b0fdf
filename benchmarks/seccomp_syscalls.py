"""Which system calls grading runs make outside the seccomp allow-list (``policy.SECCOMP_ALLOWED``).

    sudo python benchmarks/seccomp_syscalls.py                 # corpus + integrity files
    sudo python benchmarks/seccomp_syscalls.py --hostile       # the hostile files too
    sudo python benchmarks/seccomp_syscalls.py --json out.json

Grades every file through the strict sandbox with ``ATTN_GRADER_SANDBOX_SECCOMP=log``: the
allow-list, but a call outside it is allowed and logged by the kernel ("audit: type=1326 ...
syscall=N" in dmesg). It then reads the kernel log for those lines from the run's uids since
it started, and prints each syscall with how often it was logged. An empty list for the corpus
and integrity files is what the allow-list promises; the hostile files are attacks, so what
they call outside it is what the allow-list refuses (check it against the hostile suite).

The log mode allows what it logs, so ``--hostile`` runs the attacks without a syscall filter
(every other layer stays): use it on a test host only. Through ``grade_source`` most hostile
files stop at the grader's own checks (a file importing ``ctypes`` is refused before it runs);
tests/test_sandbox_hostile.py calls them directly, under the allow-list.

Needs root (strict sandbox, dmesg). The kernel rate-limits audit lines when no audit daemon
runs, so a name may be missed once: rerun until the list is stable. Syscalls made by the
sandbox's own set-up, before the filter is loaded, are never seen: only the child's.
"""
from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
AUDIT = re.compile(r"type=1326 .*? uid=(\d+) .*? syscall=(\d+)")
STAMP = re.compile(r"^\[\s*(\d+\.\d+)\]")


def files(hostile: bool) -> list[tuple[str, str]]:
    tests = os.path.join(ROOT, "tests")
    found = [(p, p.split(os.sep)[-4]) for task in ("sdpa", "mha")
             for p in sorted(glob.glob(os.path.join(ROOT, "grader", "tasks", task, "corpus", "*", "*.py")))]
    for path in sorted(glob.glob(os.path.join(tests, "integrity", "*.py"))):
        with open(path, encoding="utf-8") as f:
            found.append((path, re.search(r"^# task: (\w+)", f.read(800), re.M).group(1)))
    if hostile:  # placeholders for the hostile suite's host paths stay unfilled: they only miss
        found += [(p, "sdpa") for p in sorted(glob.glob(os.path.join(tests, "hostile", "*.py")))]
    return found


def kernel_log(after: float = -1.0) -> list[tuple[float, str]]:
    """(timestamp, line) of the kernel log's lines stamped after ``after`` (it is a ring buffer)."""
    out = subprocess.run(["dmesg"], capture_output=True, text=True, check=True).stdout
    lines = []
    for line in out.splitlines():
        stamp = STAMP.match(line)
        if stamp and float(stamp.group(1)) > after:
            lines.append((float(stamp.group(1)), line))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hostile", action="store_true", help="grade tests/hostile/ too")
    parser.add_argument("--json", help="also write the counts to this file")
    args = parser.parse_args()
    os.environ["ATTN_GRADER_SANDBOX_SECCOMP"] = "log"
    import pyseccomp

    from grader.grading import grade_source
    from grader.sandbox import Limits, policy, runs

    # The hostile files loop, sleep and stall: tight limits, as in tests/test_sandbox_hostile.py.
    tight = Limits(memory_bytes=1 << 30, cpu_seconds=2, wall_seconds=6, call_seconds=2, load_seconds=4)

    before = max((stamp for stamp, _ in kernel_log()), default=-1.0)
    for path, task in files(args.hostile):
        with open(path, "rb") as f:
            limits = tight if f"{os.sep}hostile{os.sep}" in path else None
            report = grade_source(f.read(), task, seed=12345, sandbox="strict", limits=limits)
        print(f"{os.path.relpath(path, ROOT)}: {report.score}/{report.max_score}", file=sys.stderr)
    arch = pyseccomp.system_arch()
    counts: collections.Counter = collections.Counter()
    for _, line in kernel_log(before):
        found = AUDIT.search(line)
        if found and runs.UID_BASE <= int(found.group(1)) < runs.UID_BASE + runs.UID_SLOTS:
            name = pyseccomp.resolve_syscall(arch, int(found.group(2)))
            counts[name.decode() if isinstance(name, bytes) else str(name)] += 1
    result = {"outside_the_allow_list": dict(counts.most_common()),
              "of_them_on_the_deny_list": sorted(set(counts) & set(policy.SECCOMP_DENIED))}
    print(json.dumps(result, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
