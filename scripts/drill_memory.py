"""Memory-pressure drill: a grading worker host short of memory fails one grading with a
reason and goes on.

    sudo /work/main/.venv/bin/python scripts/drill_memory.py [--limit-mb 900] [--hog-mb 1200]

The ``attn-grader worker`` command runs in a memory cgroup of the drill's own (cgroup v1
``memory.limit_in_bytes``, or v2 ``memory.max``) of ``--limit-mb`` MiB: the host's memory,
smaller than what the sandbox lets one submission take (``SANDBOX_MEMORY_BYTES``, 2 GiB), so
it is the host that runs out, not the submission's own limit. Three submissions in a row: the
reference implementation, a program that allocates ``--hog-mb`` MiB in its attention call, the
reference again. Figures: each outcome (status, score, the reason given), whether the worker
command stayed up, its grading processes' restarts, how often the host's limit was hit and
its peak, and the time to grade the submission after the one that ran out.

The database is a PostgreSQL cluster of the drill's own on a tmpfs, Redis the machine's (a
namespace of the drill's own). Prints a JSON summary, also written to ``--out``.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from drill_support import REFERENCE, Service, database_check, private_postgres, say, tmpfs, wait

def hog_code(megabytes: int) -> str:
    """The reference implementation, whose attention call first takes ``megabytes`` MiB."""
    return REFERENCE + f'''

_reference_sdpa = scaled_dot_product_attention


def scaled_dot_product_attention(*args, **kwargs):
    hog = torch.ones({megabytes} * 262144)  # {megabytes} MiB of float32, written: resident
    return _reference_sdpa(*args, **kwargs) + 0 * hog[0]
'''


class MemoryGroup:
    """A memory cgroup the worker command starts in (v1 or v2, whichever this host has)."""

    def __init__(self, name: str, limit_mb: int):
        v1 = Path("/sys/fs/cgroup/memory")
        self.v1 = v1.is_dir() and (v1 / "memory.limit_in_bytes").exists()
        self.path = (v1 if self.v1 else Path("/sys/fs/cgroup")) / name
        self.path.mkdir(exist_ok=True)
        limit = str(limit_mb * 2**20)
        if self.v1:
            (self.path / "memory.limit_in_bytes").write_text(limit)
        else:
            (self.path / "memory.max").write_text(limit)
            (self.path / "memory.swap.max").write_text("0")

    def wrap(self) -> list[str]:
        """A command prefix that moves the process into the group, then runs the command."""
        return ["sh", "-c", f'echo $$ > {self.path}/cgroup.procs && exec "$@"', "sh"]

    def pressure(self) -> dict:
        """How often the group's limit was hit, and its peak (v1); its OOM kills (v2: the
        sandbox's own cgroups nest inside, and v1 counts their kills there)."""
        if self.v1:
            return {"limit_hit_count": int((self.path / "memory.failcnt").read_text()),
                    "peak_mib": int((self.path / "memory.max_usage_in_bytes").read_text())
                    // 2**20}
        events = dict(line.split() for line in (self.path / "memory.events").read_text().splitlines())
        return {"oom_kills": int(events.get("oom_kill", 0)),
                "limit_hit_count": int(events.get("max", 0))}

    def remove(self) -> None:
        for _ in range(50):  # the worker's last children may take a moment to exit
            try:
                # the sandbox's own groups nest inside (cgroup v1): the deepest first
                for inner in sorted(self.path.rglob("*"), key=lambda p: -len(p.parts)):
                    if inner.is_dir():
                        inner.rmdir()
                self.path.rmdir()
                return
            except OSError as exc:
                error = exc
                time.sleep(0.2)
        say("cgroup left behind:", self.path, error)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit-mb", type=int, default=900)
    parser.add_argument("--hog-mb", type=int, default=1200)
    parser.add_argument("--pg-port", type=int, default=55451)
    parser.add_argument("--web-port", type=int, default=18751)
    parser.add_argument("--folder", type=Path, default=Path("/tmp/drill-memory"))
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    group = MemoryGroup(f"attn-drill-{os.getpid()}", args.limit_mb)
    try:
        with tmpfs(args.folder / "pgdisk", 400) as disk, \
                private_postgres(disk / "data", args.pg_port) as (url, _pg):
            service = Service(url, args.folder, args.web_port)
            try:
                service.prepare()
                service.start_web()
                worker = service.start_worker(wrap=group.wrap())
                outcomes, timings = [], []
                for label, code in (("reference", REFERENCE), ("hog", hog_code(args.hog_mb)),
                                    ("reference after", REFERENCE)):
                    started = time.monotonic()
                    status, body = service.submit(code)
                    assert status == 202, (status, body)
                    view = wait(lambda: (lambda v: v.get("status") in ("done", "failed") and v)(
                        service.get(f"/api/v1/submissions/{body['public_id']}")[1]), 300,
                        f"the {label} submission", 0.5)
                    timings.append(round(time.monotonic() - started, 2))
                    failed_checks = [c.get("message") for c in view.get("checks") or []
                                     if not c.get("passed")][:2]
                    outcomes.append({"submission": label, "status": view["status"],
                                     "score": view.get("score"), "error": view.get("error"),
                                     "failed_checks": failed_checks,
                                     "attempts": view["timings"]["attempts"]})
                    say(label, outcomes[-1])
                log = (args.folder / "worker.log").read_text(errors="replace")
                summary = {
                    "host_memory_limit_mib": args.limit_mb, "allocation_mib": args.hog_mb,
                    "outcomes": outcomes, "seconds_to_result": timings,
                    "worker_command_alive": worker.poll() is None,
                    "grading_process_restarts": log.count("exited with"),
                    "host_memory_group": group.pressure(),
                    "database": database_check(url),
                }
            finally:
                service.stop_all()
    finally:
        group.remove()
    text = json.dumps(summary, indent=2, default=str)
    (args.out or args.folder / "summary.json").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
