"""Disk-full drill: fill the database host's disk during a burst, then a worker host's.

    sudo /work/main/.venv/bin/python scripts/drill_disk_full.py [--disk-mb 160] [--burst 12]

Phase 1, the database's disk. A PostgreSQL cluster of the drill's own lives on a tmpfs of
``--disk-mb`` MiB (data and WAL, as on a one-disk host). Submissions are accepted with no
worker running, so they wait in the queue; then a file fills the disk, a burst of
submissions arrives, and a worker starts while the disk is full. The disk is freed again.
Figures: every answer during the fault (never a 500: 503 with Retry-After is the documented
answer), how long until the service accepts again, whether the submissions accepted before
the fault are graded after it, and that nothing is half-written (every submission has its
job, every result its checks, no row for a refused upload).

Phase 2, a worker host's disk. A second worker grades with its temporary folder (``TMPDIR``)
on a full tmpfs: it fails one grading with a reason, or grades (its sandbox needs no disk),
and goes on.

Prints a JSON summary and writes it to ``--out`` (default ``/tmp/drill-disk/summary.json``).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from drill_support import (Service, database_check, fill, private_postgres, say, tmpfs, wait)


def phase_database(args, folder: Path) -> dict:
    disk = folder / "pgdisk"
    with tmpfs(disk, args.disk_mb), private_postgres(disk / "data", args.pg_port) as (url, _pg):
        service = Service(url, folder, args.web_port)
        try:
            service.prepare()
            service.start_web()
            before = [service.submit() for _ in range(3)]
            assert all(code == 202 for code, _ in before), before
            before_ids = [body["public_id"] for _, body in before]
            filler = disk / "filler"
            started = time.monotonic()
            filled = fill(filler)
            say(f"disk full: {filled / 2**20:.1f} MiB written in {time.monotonic() - started:.1f} s")
            answers, during = [], []
            for i in range(args.burst):
                code, body = service.submit()
                answers.append(code)
                during.append({"status": code, "error": body.get("error"),
                               "retry_after": service.retry_after,
                               "public_id": body.get("public_id")})
                time.sleep(0.2)
            health = service.get("/healthz")
            reading = service.get(f"/api/v1/submissions/{before_ids[0]}")[0]
            service.start_worker()
            time.sleep(args.hold)  # the worker meets the full disk
            status_during = [service.get(f"/api/v1/submissions/{p}")[1].get("status")
                             for p in before_ids]
            filler.unlink()
            freed = time.monotonic()
            say("disk freed")
            accepted_again = wait(lambda: service.submit()[0] == 202 and time.monotonic(), 120,
                                  "a submission to be accepted again")
            accepted_ids = before_ids + [d["public_id"] for d in during if d["status"] == 202]

            def all_graded():
                states = [service.get(f"/api/v1/submissions/{p}")[1].get("status")
                          for p in accepted_ids]
                return all(s in ("done", "failed") for s in states) and states

            states = wait(all_graded, 300, "the accepted submissions to be graded", 1.0)
            graded = time.monotonic()
            scores = [service.get(f"/api/v1/submissions/{p}")[1].get("score")
                      for p in accepted_ids]
            service.stop_all()
            return {
                "disk_mib": args.disk_mb, "filled_mib": round(filled / 2**20, 1),
                "accepted_before_fault": len(before_ids),
                "answers_during_fault": {str(c): answers.count(c) for c in sorted(set(answers))},
                "answers_500": answers.count(500),
                "refusals_without_retry_after": sum(1 for d in during if d["status"] != 202
                                                    and not d["retry_after"]),
                "retry_after_during_fault": sorted({d["retry_after"] for d in during
                                                    if d["retry_after"]}),
                "first_error_during_fault": next((d["error"] for d in during if d["error"]), None),
                "healthz_during_fault": health,
                "read_of_an_old_submission_during_fault": reading,
                "before_fault_status_while_full": status_during,
                "seconds_from_freed_to_accepting": round(accepted_again - freed, 2),
                "seconds_from_freed_to_all_graded": round(graded - freed, 2),
                "accepted_total": len(accepted_ids), "final_states": states, "scores": scores,
                "database": database_check(url),
            }
        finally:
            service.stop_all()


def phase_worker_disk(args, folder: Path) -> dict:
    """A worker whose temporary folder is full; the database's disk is fine."""
    disk = folder / "workerdisk"
    with tmpfs(folder / "pgdisk2", 400) as pgdisk, \
            private_postgres(pgdisk / "data", args.pg_port + 1) as (url, _pg), \
            tmpfs(disk, 8):
        service = Service(url, folder, args.web_port + 1)
        try:
            service.prepare()
            service.start_web()
            fill(disk / "filler")
            proc = service.start_worker("full-worker", env={"TMPDIR": str(disk)})
            ids = []
            for code in (service.submit()[1], service.submit()[1]):
                ids.append(code["public_id"])
            states = wait(lambda: (lambda s: all(x.get("status") in ("done", "failed") for x in s)
                                   and s)([service.get(f"/api/v1/submissions/{p}")[1]
                                           for p in ids]), 300, "the gradings", 1.0)
            return {"worker_alive_after": proc.poll() is None,
                    "outcomes": [{"status": s.get("status"), "score": s.get("score"),
                                  "error": s.get("error")} for s in states],
                    "database": database_check(url)}
        finally:
            service.stop_all()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--disk-mb", type=int, default=160)
    parser.add_argument("--burst", type=int, default=12)
    parser.add_argument("--hold", type=float, default=8.0, help="seconds the worker meets the full disk")
    parser.add_argument("--pg-port", type=int, default=55441)
    parser.add_argument("--web-port", type=int, default=18741)
    parser.add_argument("--folder", type=Path, default=Path("/tmp/drill-disk"))
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    summary = {"database_disk_full": phase_database(args, args.folder),
               "worker_disk_full": phase_worker_disk(args, args.folder)}
    text = json.dumps(summary, indent=2, default=str)
    (args.out or args.folder / "summary.json").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
