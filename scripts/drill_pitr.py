"""Point-in-time recovery drill: a base backup plus archived WAL, the database host lost under
load, the service back on the recovered database; the recovery point and time measured.

    sudo /work/main/.venv/bin/python scripts/drill_pitr.py [--load 30] [--rate 5] [--archive-timeout 10]

A PostgreSQL cluster of the drill's own archives its WAL (``archive_mode``, ``archive_command``
copying each finished segment, ``archive_timeout`` closing a segment at least that often). A
base backup is taken (``pg_basebackup``), then submissions arrive through the API for
``--load`` seconds, then the cluster is killed and its data folder set aside (the disk is
lost). The recovery: the base backup into a fresh folder, ``restore_command`` reading the
archive, ``recovery.signal``, start; the web process that was running all along reconnects.
Figures: submissions accepted and how many the recovery lost (the recovery point, in seconds
of accepted work), the time from the start of the restore to the database accepting writes
and to the service accepting a submission again (the recovery time), and whether a new
submission after recovery reuses a lost one's public id.
"""
from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from drill_support import PG_BIN, Service, private_postgres, run, say, wait

AS_PG = ["runuser", "-u", "postgres", "--"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--load", type=float, default=30.0, help="seconds of submissions")
    parser.add_argument("--rate", type=float, default=5.0, help="submissions a second")
    parser.add_argument("--archive-timeout", type=int, default=10)
    parser.add_argument("--pg-port", type=int, default=55461)
    parser.add_argument("--web-port", type=int, default=18771)
    parser.add_argument("--folder", type=Path, default=Path("/tmp/drill-pitr"))
    args = parser.parse_args()
    shutil.rmtree(args.folder, ignore_errors=True)
    (args.folder / "wal").mkdir(parents=True)
    shutil.chown(args.folder / "wal", "postgres")
    archive = (f"-c wal_level=replica -c archive_mode=on -c archive_timeout={args.archive_timeout} "
               f"-c archive_command='cp %p {args.folder / 'wal'}/%f'")
    data = args.folder / "cluster" / "data"
    data.parent.mkdir()
    with private_postgres(data, args.pg_port, archive) as (url, pg_ctl):
        service = Service(url, args.folder, args.web_port)
        try:
            service.prepare()
            service.start_web()
            base = args.folder / "cluster" / "base"
            started = time.monotonic()
            run([*AS_PG, str(PG_BIN / "pg_basebackup"), "-h", "127.0.0.1", "-p", str(args.pg_port),
                 "-U", "postgres", "-D", str(base), "-Fp", "-X", "fetch", "-c", "fast"])
            base_seconds = time.monotonic() - started
            say(f"base backup in {base_seconds:.2f} s")

            accepted: list[tuple[float, str]] = []
            began = time.monotonic()
            while time.monotonic() - began < args.load:
                code, body = service.submit()
                if code == 202:
                    accepted.append((time.monotonic(), body["public_id"]))
                time.sleep(1 / args.rate)
            run([*pg_ctl, "-m", "immediate", "stop"])  # the host goes down ...
            lost_at = time.monotonic()
            shutil.move(str(data), str(data.parent / "lost-disk"))  # ... with its disk
            say(f"database lost after {len(accepted)} accepted submissions")
            down = service.submit()[0]

            restore_began = time.monotonic()
            shutil.copytree(base, data, symlinks=True)
            shutil.chown(data, "postgres")
            for path in data.rglob("*"):
                shutil.chown(path, "postgres")
            with open(data / "postgresql.auto.conf", "a") as conf:
                conf.write(f"restore_command = 'cp {args.folder / 'wal'}/%f %p'\n")
            (data / "recovery.signal").touch()
            shutil.chown(data / "recovery.signal", "postgres")
            run([*pg_ctl, "-w", "-t", "600", "start"])
            writable = wait(lambda: _writable(url) and time.monotonic(), 600,
                            "the recovered database to accept writes", 0.2)
            serving = wait(lambda: service.submit()[0] == 202 and time.monotonic(), 120,
                           "the service to accept a submission", 0.2)
            present = _public_ids(url)
            kept = [(t, p) for t, p in accepted if p in present]
            lost = [(t, p) for t, p in accepted if p not in present]
            new = service.submit()[1].get("public_id")
            summary = {
                "archive_timeout_s": args.archive_timeout, "base_backup_s": round(base_seconds, 2),
                "accepted": len(accepted), "recovered": len(kept), "lost": len(lost),
                "recovery_point_s": round(lost_at - kept[-1][0], 1) if kept else None,
                "lost_span_s": [round(lost[0][0] - lost_at, 1), round(lost[-1][0] - lost_at, 1)]
                if lost else [],
                "answer_while_down": down,
                "restore_to_writable_s": round(writable - restore_began, 2),
                "restore_to_accepting_s": round(serving - restore_began, 2),
                "outage_s": round(serving - lost_at, 2),
                "new_public_id_reuses_a_lost_one": new in {p for _t, p in lost},
                "wal_segments_archived": len(list((args.folder / "wal").glob("0*"))),
            }
        finally:
            service.stop_all()
    text = json.dumps(summary, indent=2)
    (args.folder / "summary.json").write_text(text)
    print(text)


def _writable(url: str) -> bool:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(text("SELECT NOT pg_is_in_recovery()")).scalar()
    except Exception:  # still starting
        return False
    finally:
        engine.dispose()


def _public_ids(url: str) -> set[str]:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.connect() as conn:
        ids = set(conn.execute(text("SELECT public_id FROM submissions")).scalars())
    engine.dispose()
    return ids


if __name__ == "__main__":
    main()
