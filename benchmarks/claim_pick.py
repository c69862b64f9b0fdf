"""The workers' claim with a course's history in the table: 100,000 finished jobs.

    python benchmarks/claim_pick.py [--done 100000] [--jobs 400] [--backend both|postgresql|sqlite]
                                    [--pg-admin postgresql+psycopg://postgres@127.0.0.1:5432/postgres]

Each backend gets two databases, migrated with the project's own migrations: one holding
DONE finished jobs and JOBS queued ones, the baseline holding the JOBS queued ones alone.
``claim_next`` (one connection, the project's own code) takes every queued job of both, in
interleaved rounds, so the ratio (with history / without) is measured under the same load.
A claim whose cost does not grow with the history reads about 1.0. Also printed: the plan of
the pick (PostgreSQL: EXPLAIN ANALYZE) and, for comparison, the time of the pick as it was
before migration 0008 (``ORDER BY id`` over an OR of statuses, which walked the primary key
past every finished job: 35 ms a pick at 100,000 in the scale review).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

ROUND = 50  # claims per round; the rounds alternate between the two databases


def _fill(url: str, done: int, jobs: int) -> None:
    """Migrate, then add DONE finished and JOBS queued submissions with their jobs."""
    from sqlalchemy import insert, select

    from web.db import get_engine, session_factory, upgrade
    from web.models import Assignment, GradingJob, Submission, utcnow
    from web.services.courses import ensure_default_course
    from web.services.users import add_user

    upgrade(url)
    engine = get_engine(url)
    with session_factory(engine)() as session:
        ensure_default_course(session)
        user = add_user(session, "claims@example.org", "student", None)
        session.commit()
        user_id = user.id
        assignment_id = session.scalar(select(Assignment.id).where(Assignment.slug == "sdpa"))
    now = utcnow()
    for start in range(0, done + jobs, 20_000):
        rows = range(start, min(done + jobs, start + 20_000))
        with engine.begin() as conn:
            conn.execute(insert(Submission), [
                {"id": i + 1, "assignment_id": assignment_id, "user_id": user_id,
                 "task_id": "sdpa", "code": "x = 1\n", "code_sha256": "0" * 64,
                 "filename": "submission.py", "created_at": now, "late": False,
                 "status": "done" if i < done else "queued"} for i in rows])
            conn.execute(insert(GradingJob), [
                {"id": i + 1, "submission_id": i + 1, "queue": "cpu",
                 "status": "done" if i < done else "queued", "attempts": 1 if i < done else 0,
                 "max_attempts": 3, "queued_at": now, "notified_at": now,
                 "finished_at": now if i < done else None} for i in rows])
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("ANALYZE")


def _backend_cpu(engine) -> float | None:
    """CPU seconds so far of the PostgreSQL backends serving this database (a server on this
    machine, read from /proc; None elsewhere or on SQLite)."""
    if engine.dialect.name == "sqlite":
        return None
    with engine.connect() as conn:
        pids = [row[0] for row in conn.exec_driver_sql(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()")]
    total = 0.0
    for pid in pids:
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            return None
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _claim_round(engine, n: int) -> list[float]:
    from web.dispatch.claim import claim_next

    times = []
    for _ in range(n):
        started = time.perf_counter()
        claim = claim_next(engine, "bench", ("cpu",), lease_seconds=3600.0)
        times.append(time.perf_counter() - started)
        assert claim is not None, "ran out of queued jobs"
    return times


def _old_pick_sql(engine) -> str:
    """The pick as it was before migration 0008: an OR of two statuses, in id order."""
    from sqlalchemy import and_, or_, select

    from web.models import GradingJob as J, utcnow

    now = utcnow()
    claimable = and_(or_(J.status == "queued", and_(J.status == "running", J.lease_until < now)),
                     J.attempts < J.max_attempts)
    pick = select(J.id).where(claimable, J.queue.in_(["cpu"])).order_by(J.id).limit(1)
    if engine.dialect.name != "sqlite":
        pick = pick.with_for_update(skip_locked=True)
    return str(pick.compile(engine, compile_kwargs={"literal_binds": True}))


def _pick_sql(engine) -> str:
    """claim_next's pick as the project builds it, with its values written in."""
    from web.dispatch.claim import next_job
    from web.models import utcnow

    pick = next_job(("cpu",), utcnow())
    if engine.dialect.name != "sqlite":
        pick = pick.with_for_update(skip_locked=True)
    return str(pick.compile(engine, compile_kwargs={"literal_binds": True}))


def _pick_ms(engine, sql: str, repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        with engine.begin() as conn:
            started = time.perf_counter()
            conn.exec_driver_sql(sql).scalar()
            times.append(time.perf_counter() - started)
            conn.rollback()
    return statistics.median(times) * 1000


def _plan(engine, sql: str) -> list[str]:
    if engine.dialect.name == "sqlite":
        with engine.connect() as conn:
            return [row[-1] for row in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql)]
    with engine.begin() as conn:
        plan = [row[0] for row in conn.exec_driver_sql("EXPLAIN (ANALYZE, BUFFERS) " + sql)]
        conn.rollback()
        return plan


def run_backend(backend: str, done: int, jobs: int, pg_admin: str) -> dict:
    from sqlalchemy import create_engine, text

    from web.db import dispose_engines, get_engine

    folder = tempfile.mkdtemp(prefix="attn-claim-bench-")
    names = {"history": f"claim_bench_{uuid.uuid4().hex[:8]}",
             "baseline": f"claim_bench_{uuid.uuid4().hex[:8]}"}
    admin = create_engine(pg_admin, isolation_level="AUTOCOMMIT") if backend != "sqlite" else None
    urls = {}
    try:
        for kind, name in names.items():
            if admin is None:
                urls[kind] = f"sqlite:///{folder}/{name}.db"
            else:
                with admin.connect() as conn:
                    conn.execute(text(f'CREATE DATABASE "{name}"'))
                urls[kind] = pg_admin.rsplit("/", 1)[0] + "/" + name
            started = time.monotonic()
            _fill(urls[kind], done if kind == "history" else 0, jobs)
            print(f"  {backend}: {kind} database filled in {time.monotonic() - started:.1f} s",
                  flush=True)
        engines = {kind: get_engine(url) for kind, url in urls.items()}
        pick = _pick_sql(engines["history"])
        plan = _plan(engines["history"], pick)
        pick_ms = _pick_ms(engines["history"], pick)
        old_ms = _pick_ms(engines["history"], _old_pick_sql(engines["history"]))
        times: dict[str, list[float]] = {"history": [], "baseline": []}
        cpu: dict[str, float | None] = {"history": 0.0, "baseline": 0.0}
        for kind in times:  # one warm-up claim each (connection, statement cache)
            _claim_round(engines[kind], 1)
        for _ in range((jobs - 1) // ROUND):
            for kind in times:
                before = _backend_cpu(engines[kind])
                times[kind] += _claim_round(engines[kind], ROUND)
                after = _backend_cpu(engines[kind])
                cpu[kind] = None if None in (before, after, cpu[kind]) else \
                    cpu[kind] + after - before
        med = {kind: statistics.median(t) * 1000 for kind, t in times.items()}
        p90 = {kind: sorted(t)[int(0.9 * len(t))] * 1000 for kind, t in times.items()}
        return {"backend": backend, "finished_jobs": done, "claims_each": len(times["history"]),
                "claim_ms_with_history": round(med["history"], 3),
                "claim_ms_p90_with_history": round(p90["history"], 3),
                "claim_ms_without_history": round(med["baseline"], 3),
                "ratio": round(med["history"] / med["baseline"], 2),
                "pick_ms_with_history": round(pick_ms, 3),
                "postgres_cpu_ms_per_claim": {
                    kind: round(1000 * cpu[kind] / len(times[kind]), 3)
                    for kind in times if cpu[kind] is not None},
                "old_pick_ms_with_history": round(old_ms, 3), "plan": plan}
    finally:
        dispose_engines()
        if admin is not None:
            with admin.connect() as conn:
                for name in names.values():
                    conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            admin.dispose()
        shutil.rmtree(folder, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--done", type=int, default=100_000)
    parser.add_argument("--jobs", type=int, default=401)
    parser.add_argument("--backend", choices=["both", "postgresql", "sqlite"], default="both")
    parser.add_argument("--pg-admin", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--json", dest="json_out", help="also write the numbers to this file")
    args = parser.parse_args()
    backends = ["postgresql", "sqlite"] if args.backend == "both" else [args.backend]
    results = []
    for backend in backends:
        result = run_backend(backend, args.done, args.jobs, args.pg_admin)
        results.append(result)
        print(f"{backend:10s} claim_next with {args.done:,} finished jobs: "
              f"{result['claim_ms_with_history']:.2f} ms (p90 {result['claim_ms_p90_with_history']:.2f}),"
              f" without: {result['claim_ms_without_history']:.2f} ms -> ratio {result['ratio']:.2f}")
        print(f"{'':10s} its pick alone: {result['pick_ms_with_history']:.2f} ms; the pick before "
              f"migration 0008: {result['old_pick_ms_with_history']:.2f} ms")
        if result["postgres_cpu_ms_per_claim"]:
            print(f"{'':10s} PostgreSQL CPU per claim (ms): {result['postgres_cpu_ms_per_claim']}")
        print("  plan: " + "\n        ".join(result["plan"]))
    if args.json_out:
        with open(args.json_out, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
