"""Fill a database with a large course: by default 1,000 students and 20,000 graded submissions.

For load tests and for checking that the instructor pages stay fast at scale:

    attn-grader db upgrade
    python scripts/seed_large.py                      # ATTN_GRADER_DATABASE_URL or instance/
    python scripts/seed_large.py --students 200 --submissions 1000 --database-url sqlite:///x.db

Every submission gets a finished grading job, a result and one row per check (as the grader
writes them), spread over the last two weeks; some students also have a submitted quiz
attempt, a few with free-text answers waiting for a manual grade. All students share one
password (``--password``, printed at the end) so a load test can sign them in; the instructor
is ``prof@example.org`` with the same password. Rows are written with bulk inserts, so the
default size takes seconds to a minute, not hours.
"""
from __future__ import annotations

import argparse
import hashlib
import random
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sqlalchemy import func, insert, select, text  # noqa: E402

DEFAULT_PASSWORD = "attention-is-all-you-need"
LOAD_CHECKS = ("load.source", "load.import", "load.signature")


def _next_id(session, model) -> int:
    return (session.scalar(select(func.max(model.id))) or 0) + 1


def _task_checks(task_id: str) -> list[str]:
    try:
        from grader.tasks import TASKS
        return list(LOAD_CHECKS) + [c.id for c in TASKS[task_id].checks]
    except (ImportError, KeyError):
        return list(LOAD_CHECKS) + [f"{task_id}.check{i}" for i in range(12)]


def _bulk(session, model, rows: list[dict], chunk: int = 5000) -> None:
    for start in range(0, len(rows), chunk):
        session.execute(insert(model), rows[start:start + chunk])


def seed_large(engine, students: int = 1000, submissions: int = 20000, *,
               password: str = DEFAULT_PASSWORD, quiz_fraction: float = 0.5, seed: int = 0,
               with_checks: bool = True, log=print) -> dict:
    """Add ``students`` and ``submissions`` to the default course; returns what was made."""
    from web.auth import hash_password
    from web.db import session_factory
    from web.models import (StoredCheck, Enrollment, GradingJob, QuizAnswer, QuizAttempt,
                            Result, Submission, User, utcnow)
    from web.services.courses import ensure_default_course

    rng = random.Random(seed)
    started = time.monotonic()
    now = utcnow()
    with session_factory(engine)() as session:
        course = ensure_default_course(session)
        session.commit()
        tasks = [a for a in course.assignments if a.kind == "task"]
        quizzes = [a for a in course.assignments if a.kind == "quiz"]
        shared_hash = hash_password(password)  # argon2 once: 1,000 hashes would take minutes

        # -- people --
        first_user = _next_id(session, User)
        tag = f"{first_user:06d}"  # unique per run, so the script can be run twice
        users, enrollments = [], []
        instructor = session.scalar(select(User).where(User.email == "prof@example.org"))
        if instructor is None:
            users.append({"id": first_user, "email": "prof@example.org", "name": "Professor",
                          "role": "instructor", "password_hash": shared_hash, "is_active": True,
                          "locale": "en", "created_at": now})
        student_ids = []
        for i in range(students):
            uid = first_user + 1 + i
            student_ids.append(uid)
            users.append({"id": uid, "email": f"s{tag}-{i:05d}@students.example.org",
                          "name": f"Student {i:05d}", "role": "student",
                          "password_hash": shared_hash, "is_active": True,
                          "locale": rng.choice(("en", "en", "ru", "zh")), "created_at": now})
        first_enrollment = _next_id(session, Enrollment)
        for n, user in enumerate(users):
            enrollments.append({"id": first_enrollment + n, "course_id": course.id,
                                "user_id": user["id"], "role": user["role"], "created_at": now})
        _bulk(session, User, users)
        _bulk(session, Enrollment, enrollments)

        # -- submissions, jobs, results, checks --
        sub_rows, job_rows, result_rows, check_rows = [], [], [], []
        sub_id, job_id = _next_id(session, Submission), _next_id(session, GradingJob)
        result_id, check_id = _next_id(session, Result), _next_id(session, StoredCheck)
        checks_of = {a.id: _task_checks(a.task_id) for a in tasks}
        for n in range(submissions if tasks else 0):
            assignment = tasks[n % len(tasks)]
            user_id = rng.choice(student_ids)
            created = now - timedelta(seconds=rng.uniform(60, 14 * 86400))
            code = f"# submission {n} by {user_id}\ndef attention(q, k, v):\n    return v\n"
            failed = n % 97 == 5  # about 1 %, and present in any seed of 6 or more
            ids = checks_of[assignment.id]
            passed = [rng.random() < 0.8 for _ in ids]
            per_check = round(100.0 / len(ids), 4)
            score = round(per_check * sum(passed), 4)
            sub_rows.append({
                "id": sub_id, "assignment_id": assignment.id, "user_id": user_id,
                "task_id": assignment.task_id, "code": code,
                "code_sha256": hashlib.sha256(code.encode()).hexdigest(),
                "filename": "submission.py", "created_at": created, "late": False,
                "status": "failed" if failed else "done",
                "score": None if failed else score, "max_score": None if failed else 100.0,
                "grader_version": None if failed else "seed-1",
                "error": "grading host lost: seeded" if failed else None})
            wait = rng.uniform(0.05, 3.0)
            duration = rng.uniform(2.0, 12.0)
            job_rows.append({
                "id": job_id, "submission_id": sub_id, "queue": assignment.queue,
                "status": "failed" if failed else "done", "attempts": 3 if failed else 1,
                "max_attempts": 3, "worker": f"seed-host:cpu{n % 4}",
                "error": "grading host lost: seeded" if failed else None,
                "queued_at": created, "notified_at": created,
                "started_at": created + timedelta(seconds=wait),
                "finished_at": created + timedelta(seconds=wait + duration)})
            if not failed:
                result_rows.append({
                    "id": result_id, "submission_id": sub_id, "job_attempt": 1, "kind": "grade",
                    "score": score, "max_score": 100.0, "passed": all(passed), "error": None,
                    "grader_version": "seed-1", "sandbox": "strict", "worker": "seed-host:cpu0",
                    "report": {"task": assignment.task_id, "score": score, "max_score": 100.0,
                               "seeded": True},
                    "created_at": created + timedelta(seconds=wait + duration)})
                if with_checks:
                    for position, (cid, ok) in enumerate(zip(ids, passed)):
                        check_rows.append({
                            "id": check_id, "result_id": result_id, "position": position,
                            "check_id": cid, "passed": ok, "points": per_check if ok else 0.0,
                            "max_points": per_check,
                            "message": "" if ok else f"{cid}: max abs error 0.{rng.randint(1, 9)}",
                            "details": None})
                        check_id += 1
                result_id += 1
            sub_id += 1
            job_id += 1
        _bulk(session, Submission, sub_rows)
        _bulk(session, GradingJob, job_rows)
        _bulk(session, Result, result_rows)
        _bulk(session, StoredCheck, check_rows, chunk=10000)

        # -- quiz attempts --
        attempt_rows, answer_rows = [], []
        attempt_id, answer_id = _next_id(session, QuizAttempt), _next_id(session, QuizAnswer)
        for quiz in quizzes:
            questions = list(quiz.question_ids or [])[:12]
            for uid in student_ids:
                if not questions or rng.random() >= quiz_fraction:
                    continue
                submitted = now - timedelta(seconds=rng.uniform(60, 7 * 86400))
                points = 0.0
                needs_manual = False
                for position, qid in enumerate(questions):
                    manual = rng.random() < 0.02
                    correct = None if manual else rng.random() < 0.7
                    needs_manual |= manual
                    points += 1.0 if correct else 0.0
                    answer_rows.append({
                        "id": answer_id, "attempt_id": attempt_id, "question_id": qid,
                        "position": position, "seed": rng.getrandbits(62), "answer": "seeded",
                        "correct": correct, "points": 1.0 if correct else 0.0,
                        "max_points": 1.0, "feedback": "", "details": None,
                        "answered_at": submitted})
                    answer_id += 1
                attempt_rows.append({
                    "id": attempt_id, "assignment_id": quiz.id, "user_id": uid, "lang": "en",
                    "started_at": submitted - timedelta(minutes=20), "submitted_at": submitted,
                    "status": "submitted", "score": points, "max_score": float(len(questions)),
                    "needs_manual": needs_manual})
                attempt_id += 1
        _bulk(session, QuizAttempt, attempt_rows)
        _bulk(session, QuizAnswer, answer_rows, chunk=10000)

        if engine.dialect.name == "postgresql":  # explicit ids: move the sequences past them
            for model in (User, Enrollment, Submission, GradingJob, Result, StoredCheck,
                          QuizAttempt, QuizAnswer):
                table = model.__tablename__
                session.execute(text(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f"(SELECT COALESCE(MAX(id), 1) FROM {table}))"))
        session.commit()
    made = {"students": students, "submissions": len(sub_rows), "results": len(result_rows),
            "checks": len(check_rows), "quiz_attempts": len(attempt_rows),
            "quiz_answers": len(answer_rows), "password": password,
            "emails": [u["email"] for u in users if u["role"] == "student"],
            "seconds": round(time.monotonic() - started, 1)}
    log(f"seeded {students} students, {len(sub_rows)} submissions ({len(result_rows)} results, "
        f"{len(check_rows)} checks), {len(attempt_rows)} quiz attempts in {made['seconds']} s")
    return made


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=1000)
    parser.add_argument("--submissions", type=int, default=20000)
    parser.add_argument("--database-url", default=None,
                        help="default: ATTN_GRADER_DATABASE_URL or the instance's SQLite file")
    parser.add_argument("--password", default=DEFAULT_PASSWORD,
                        help="every seeded account's password")
    parser.add_argument("--no-checks", action="store_true", help="skip per-check rows")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    args = parser.parse_args(argv)
    if args.students < 1 or args.submissions < 0:
        parser.error("--students must be at least 1 and --submissions at least 0")

    from web.config import load_config
    from web.db import DatabaseNotMigrated, check_migrated, get_engine

    config = load_config({"DATABASE_URL": args.database_url} if args.database_url else None)
    engine = get_engine(config["DATABASE_URL"])
    try:
        check_migrated(engine)
    except DatabaseNotMigrated as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        made = seed_large(engine, args.students, args.submissions, password=args.password,
                          with_checks=not args.no_checks, seed=args.seed)
    except ValueError as exc:  # the password policy
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"sign in as prof@example.org or {made['emails'][0]} ... with password "
          f"{made['password']!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
