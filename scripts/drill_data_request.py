"""Data-request drill: one student's data exported, then erased, as a data-protection officer asks.

    sudo /work/main/.venv/bin/python scripts/drill_data_request.py [--students 5] [--per 2]

On this machine's PostgreSQL (a database of the drill's own, ``--admin-url``, dropped at the
end) and Redis (the doorbell, in a namespace of the drill's own): ``attn-grader serve
--workers 0`` keeping its access lines in files (``ACCESS_LOG_DIR``) and one ``attn-grader
worker`` with the real grader. STUDENTS students submit PER files each through the API and
are graded; the first, the subject, also has an LMS identity and a quiz attempt with a
written answer, and one of their files prints something (the program's output is stored in
the report). Then the officer's commands: ``attn-grader data export``, ``data erase --yes``,
``data requests``, and an export after the erasure.

Figures: the export's time, size and rows per table, checked against the database (every
row of the subject's, and no other person's email or user id in it); the erasure's time and
counts; the course's statistics (score table, best scores, counts, quiz points) before and
after, which must be equal; what is left of the subject (the account anonymised, code and
written answers empty, LMS identities and tokens gone, their access lines without them while
the number of lines stays); the other students' rows untouched; the record of both requests.

Prints a JSON summary and writes it to ``--out`` (default ``/tmp/drill-data/summary.json``).
"""
from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
from pathlib import Path

from drill_support import REFERENCE, ROOT, Service, run, say, wait

sys.path.insert(0, str(ROOT))  # the service's own functions read the statistics

SUBJECT_PRINTS = "print('the subject was here')\n" + REFERENCE


def people(url: str, count: int) -> list[dict]:
    """``count`` students with an API token each, the first the subject."""
    from web.auth import issue_token
    from web.db import get_engine, session_factory
    from web.services.users import add_user

    out = []
    with session_factory(get_engine(url))() as session:
        for i in range(count):
            user = add_user(session, f"student{i}.{secrets.token_hex(3)}@example.org", "student",
                            name=f"Student {i}")
            out.append({"id": user.id, "email": user.email, "token": issue_token(session, user)})
        session.commit()
    return out


def lms_identity_and_quiz(url: str, user_id: int) -> None:
    from web.db import get_engine, session_factory
    from web.lti.models import LtiPlatform, LtiUser
    from web.models import QuizAnswer, QuizAttempt
    from web.services.courses import find_assignment

    with session_factory(get_engine(url))() as session:
        platform = LtiPlatform(name="LMS", issuer="https://lms.drill.example", client_id="drill",
                               auth_login_url="https://lms.drill.example/auth",
                               auth_token_url="https://lms.drill.example/token",
                               key_set_url="https://lms.drill.example/jwks", deployment_ids=["1"])
        session.add(platform)
        session.flush()
        session.add(LtiUser(platform_id=platform.id, issuer=platform.issuer, sub="lms-subject",
                            user_id=user_id, given_name="Sub", family_name="Ject"))
        attempt = QuizAttempt(assignment_id=find_assignment(session, "quiz").id, user_id=user_id,
                              status="submitted", score=1.0, max_score=2.0)
        attempt.answers = [QuizAnswer(question_id="why", seed=1, answer="in my own words",
                                      points=1.0, max_points=1.0, correct=True),
                           QuizAnswer(question_id="pick", seed=2, answer=["b"], position=1,
                                      points=0.0, max_points=1.0, correct=False)]
        session.add(attempt)
        session.commit()


def statistics(url: str) -> dict:
    """What the course's figures are made of (tests/test_data_requests.py compares the same)."""
    from sqlalchemy import func, select

    from web.db import get_engine, session_factory
    from web.models import QuizAnswer, Result, Submission
    from web.services.analytics import best_scores
    from web.services.courses import default_course, find_assignment
    from web.services.scores import scores_table

    with session_factory(get_engine(url))() as session:
        rows = scores_table(session, default_course(session))
        return {"best": best_scores(session, find_assignment(session, "sdpa")),
                "scores": sorted(tuple(sorted((k, str(v)) for k, v in row.items()
                                              if k not in ("email", "name", "user")))
                                 for row in rows),
                "results": session.scalar(select(func.count(Result.id))),
                "submissions": session.scalar(select(func.count(Submission.id))),
                "quiz": [tuple(r) for r in session.execute(
                    select(QuizAnswer.question_id, QuizAnswer.points, QuizAnswer.correct)
                    .order_by(QuizAnswer.id))]}


def rows_of(url: str, user_id: int) -> dict:
    """The subject's rows per table, counted in the database (what the export must hold)."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    sql = {"submissions": "SELECT count(*) FROM submissions WHERE user_id = :u",
           "results": "SELECT count(*) FROM results r JOIN submissions s ON s.id = r.submission_id "
                      "WHERE s.user_id = :u",
           "check_results": "SELECT count(*) FROM check_results c JOIN results r ON r.id = c.result_id "
                            "JOIN submissions s ON s.id = r.submission_id WHERE s.user_id = :u",
           "grading_jobs": "SELECT count(*) FROM grading_jobs j JOIN submissions s "
                           "ON s.id = j.submission_id WHERE s.user_id = :u",
           "quiz_answers": "SELECT count(*) FROM quiz_answers a JOIN quiz_attempts q "
                           "ON q.id = a.attempt_id WHERE q.user_id = :u",
           "lti_users": "SELECT count(*) FROM lti_users WHERE user_id = :u",
           "api_tokens": "SELECT count(*) FROM api_tokens WHERE user_id = :u"}
    with engine.connect() as conn:
        counts = {name: conn.execute(text(q), {"u": user_id}).scalar() for name, q in sql.items()}
    engine.dispose()
    return counts


def finished(url: str) -> int:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.connect() as conn:
        count = conn.execute(text("SELECT count(*) FROM grading_jobs "
                                  "WHERE status IN ('done', 'failed')")).scalar()
    engine.dispose()
    return count


def others_untouched(url: str, subject: int) -> dict:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.connect() as conn:
        row = conn.execute(text(
            "SELECT count(*), count(*) FILTER (WHERE code = ''), "
            "(SELECT count(*) FROM users WHERE id <> :u AND email LIKE 'erased-%') "
            "FROM submissions WHERE user_id <> :u"), {"u": subject}).one()
    engine.dispose()
    return {"their_submissions": row[0], "their_submissions_emptied": row[1],
            "other_accounts_anonymised": row[2]}


def timed_cli(service: Service, *args) -> tuple[float, str, int]:
    started = time.monotonic()
    done = run([sys.executable, "-m", "grader.cli", *args], check=False, env=service.env, cwd=ROOT)
    return round(time.monotonic() - started, 2), (done.stdout + done.stderr).strip(), done.returncode


def drill(args, url: str, folder: Path) -> dict:
    from web import access_files

    access = folder / "access"
    service = Service(url, folder, args.web_port, ACCESS_LOG_DIR=access)
    try:
        service.prepare()
        service.start_web()
        students = people(url, args.students)
        subject = students[0]
        for student in students:
            service.token = student["token"]
            for i in range(args.per):
                code = SUBJECT_PRINTS if student is subject and i == 0 else REFERENCE
                status, body = service.submit(code)
                assert status == 202, (status, body)
        service.start_worker()
        total = args.students * args.per
        wait(lambda: finished(url) >= total, 900, "every submission to be graded", 1.0)
        lms_identity_and_quiz(url, subject["id"])
        expected = rows_of(url, subject["id"])
        before = statistics(url)
        lines_before = sum(len(p.read_text().splitlines()) for _d, p in access_files.files(access))
        subject_lines = len(access_files.lines_for_user(access, subject["id"]))

        export = folder / "subject.json"
        seconds, output, rc = timed_cli(service, "data", "export", subject["email"], "-o",
                                        str(export), "--reference", "DRILL-EXPORT")
        text_ = export.read_text()
        document = json.loads(text_)
        tables = document["tables"]
        exported = {name: len(tables.get(name, [])) for name in expected}
        leaks = [s["email"] for s in students[1:] if s["email"] in text_]
        foreign = sorted({row["user_id"] for rows in tables.values() for row in rows
                          if isinstance(row, dict) and row.get("user_id") not in
                          (None, subject["id"])})
        export_figures = {
            "rc": rc, "seconds": seconds, "bytes": len(text_.encode()),
            "mode": oct(export.stat().st_mode & 0o777),
            "rows_per_table": {k: len(v) for k, v in tables.items()},
            "access_log_lines": len(document.get("access_log") or []),
            "subject_access_lines_in_files": subject_lines,
            "rows_in_database": expected, "matches_database": exported == expected,
            "other_students_emails_in_it": leaks, "other_user_ids_in_it": foreign,
            "output": output.splitlines()[-2:]}

        seconds, output, rc = timed_cli(service, "data", "erase", subject["email"], "--yes",
                                        "--reference", "DRILL-ERASE")
        after = statistics(url)
        lines_after = sum(len(p.read_text().splitlines()) for _d, p in access_files.files(access))
        service.token = subject["token"]
        token_after = service.get("/api/v1/submissions")[0]
        from sqlalchemy import create_engine, text as sql

        engine = create_engine(url)
        with engine.connect() as conn:
            account = conn.execute(sql("SELECT email, name, password_hash IS NULL, is_active "
                                       "FROM users WHERE id = :u"), {"u": subject["id"]}).one()
            codes = conn.execute(sql("SELECT count(*) FILTER (WHERE code <> ''), count(*) "
                                     "FROM submissions WHERE user_id = :u"),
                                 {"u": subject["id"]}).one()
            written = conn.execute(sql(
                "SELECT a.answer FROM quiz_answers a JOIN quiz_attempts q ON q.id = a.attempt_id "
                "WHERE q.user_id = :u ORDER BY a.id"), {"u": subject["id"]}).scalars().all()
            stdout_kept = conn.execute(sql(
                "SELECT count(*) FROM results r JOIN submissions s ON s.id = r.submission_id "
                "WHERE s.user_id = :u AND r.report::text LIKE '%the subject was here%'"),
                {"u": subject["id"]}).scalar()
            records = conn.execute(sql("SELECT kind, reference FROM data_requests "
                                       "WHERE user_id = :u ORDER BY id"),
                                   {"u": subject["id"]}).all()
        engine.dispose()
        erase_figures = {
            "rc": rc, "seconds": seconds, "output": output.splitlines()[-3:],
            "statistics_unchanged": after == before,
            "statistics": {"submissions": after["submissions"], "results": after["results"],
                           "score_rows": len(after["scores"]), "quiz_answers": len(after["quiz"])},
            "account": {"email": account[0], "name": account[1], "password_removed": account[2],
                        "active": account[3]},
            "subject_rows_left": rows_of(url, subject["id"]),
            "subject_code_left": codes[0], "subject_submissions_kept": codes[1],
            "subject_quiz_answers": written, "program_output_left_in_reports": stdout_kept,
            "subject_access_lines_left": len(access_files.lines_for_user(access, subject["id"])),
            "access_lines_before_after": [lines_before, lines_after],
            "subject_email_in_access_files": any(subject["email"] in p.read_text()
                                                 for _d, p in access_files.files(access)),
            "subject_token_answer": token_after,
            "others": others_untouched(url, subject["id"])}
        _s, listed, _rc = timed_cli(service, "data", "requests")
        _s, again, again_rc = timed_cli(service, "data", "export", subject["email"])
        return {"students": args.students, "per_student": args.per, "graded": total,
                "export": export_figures, "erasure": erase_figures,
                "records": [list(r) for r in records],
                "requests_listing_names_both": "DRILL-EXPORT" in listed and "DRILL-ERASE" in listed,
                "export_after_erasure": {"rc": again_rc, "output": again.splitlines()[-1:]}}
    finally:
        service.stop_all()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--students", type=int, default=5)
    parser.add_argument("--per", type=int, default=2, help="submissions per student")
    parser.add_argument("--admin-url", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--web-port", type=int, default=8795)
    parser.add_argument("--folder", default="/tmp/drill-data")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    from sqlalchemy import create_engine, text

    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    name = f"drill_data_{secrets.token_hex(4)}"
    admin = create_engine(args.admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        summary = drill(args, args.admin_url.rsplit("/", 1)[0] + "/" + name, folder)
    finally:
        from web.db import dispose_engines

        dispose_engines()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
    out = Path(args.out or folder / "summary.json")
    out.write_text(json.dumps(summary, indent=1, default=str))
    print(json.dumps(summary, indent=1, default=str))
    say("summary written to", out)


if __name__ == "__main__":
    main()
