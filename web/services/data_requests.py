"""A person's data on request: export everything stored about them, or erase it.

What is "theirs" is read from the schema rather than listed by hand: the rows of every table
that hangs off their ``users`` row through ``ON DELETE CASCADE`` foreign keys (their tokens,
enrollments, extensions, LTI identities and score syncs, submissions with their results,
checks, jobs and manual grades, quiz attempts with their answers and tries), so a table added
later is exported too. Foreign keys that only name them as the actor (an instructor's grade
of someone else, an invitation they created) are not followed: those rows are about others.

Erasure keeps the course's statistics whole: the account stays as an anonymous row, so every
score, result, attempt and count still adds up, while what identifies or was written by the
person goes: e-mail, name, password, API tokens, LMS identities, submitted code, program
output, free-text and code answers, comments about them, and the user id and address of their
access-log lines. Each export and erasure is recorded in ``data_requests`` and logged.
"""
from __future__ import annotations

import hashlib
import logging
from datetime import date, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from .. import access_files
from ..models import (ApiToken, Base, DataRequest, Extension, Invitation, ManualGrade, QuizAnswer,
                      QuizAttempt, QuizTry, Result, Submission, User, utcnow)

log = logging.getLogger(__name__)
# Secrets, even hashed, are not "data about the person": they say a password or token exists.
WITHHELD = {("users", "password_hash"), ("api_tokens", "token_hash")}
ERASED_CODE = ""
PROGRAM_OUTPUT = ("student_stdout", "student_stderr")


def owned_rows(session: Session, user_id: int) -> dict[str, list[dict]]:
    """Every row that belongs to ``user_id``, by table (parents before children)."""
    # The LTI plug-in's tables (LMS identities, scores sent) join the metadata only when its
    # models are imported (web.lti's docstring); `attn-grader data export` builds no app, so
    # without this its export left them out (found by scripts/drill_data_request.py).
    from ..lti import models as _lti_tables  # noqa: F401

    ids: dict[str, set] = {"users": {user_id}}
    found: dict[str, list[dict]] = {}
    for table in Base.metadata.sorted_tables:  # dependency order: a parent's ids come first
        if table.name == "users":
            keys = [table.c.id.in_([user_id])]
        else:
            keys = [fk.parent.in_(ids[fk.column.table.name]) for fk in table.foreign_keys
                    if fk.ondelete == "CASCADE" and fk.column.table.name in ids
                    and ids[fk.column.table.name]]
        if not keys:
            continue
        condition = keys[0]
        for key in keys[1:]:
            condition = condition | key
        rows = session.execute(select(table).where(condition).order_by(*table.primary_key)).all()
        if not rows:
            continue
        found[table.name] = [{c.name: _plain(getattr(row, c.name)) for c in table.columns
                              if (table.name, c.name) not in WITHHELD} for row in rows]
        if "id" in table.c:
            ids[table.name] = {row.id for row in rows}
    return found


def _plain(value):
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    return value


def export_person(session: Session, user: User, *, access_log_dir: str | None = None,
                  operator: str = "", reference: str = "") -> dict:
    """Everything stored about ``user`` as one JSON-ready dict; the export is recorded."""
    tables = owned_rows(session, user.id)
    tables["users"][0]["has_password"] = user.password_hash is not None
    lines = access_files.lines_for_user(access_log_dir, user.id) if access_log_dir else None
    counts = {name: len(rows) for name, rows in tables.items()}
    if lines is not None:
        counts["access_log_lines"] = len(lines)
    _record(session, "export", user, user.email, operator, reference, counts)
    return {"subject": {"id": user.id, "email": user.email, "name": user.name},
            "exported_at": utcnow().isoformat() + "Z", "tables": tables,
            "access_log": lines if lines is not None else
            "not kept by the service (ATTN_GRADER_ACCESS_LOG_DIR is unset): see your log store",
            "counts": counts}


def erase_person(session: Session, user: User, *, access_log_dir: str | None = None,
                 operator: str = "", reference: str = "") -> dict:
    """Remove or anonymise what identifies ``user`` (module docstring); returns the counts
    of what was changed. Commits."""
    counts: dict[str, int] = {}
    old_email = user.email

    def count(name: str, n: int) -> None:
        if n:
            counts[name] = counts.get(name, 0) + n

    tokens = session.scalars(select(ApiToken).where(ApiToken.user_id == user.id)).all()
    for token in tokens:
        session.delete(token)
    count("api_tokens deleted", len(tokens))
    count("lti_users deleted", _delete_lti_identities(session, user.id))

    submissions = session.scalars(select(Submission).where(Submission.user_id == user.id)).all()
    for sub in submissions:
        sub.code, sub.filename = ERASED_CODE, "erased.py"
        sub.code_sha256 = hashlib.sha256(ERASED_CODE.encode()).hexdigest()
    count("submissions: code removed", len(submissions))
    sub_ids = [s.id for s in submissions]
    for result in session.scalars(select(Result).where(Result.submission_id.in_(sub_ids))) \
            if sub_ids else ():
        if isinstance(result.report, dict) and any(k in result.report for k in PROGRAM_OUTPUT):
            result.report = {k: v for k, v in result.report.items() if k not in PROGRAM_OUTPUT}
            count("results: program output removed", 1)

    answers = session.scalars(select(QuizAnswer).join(QuizAttempt)
                              .where(QuizAttempt.user_id == user.id)).all()
    for item in [*answers, *(t for a in answers for t in a.tries)]:
        if isinstance(item.answer, str) and item.answer:  # free text or code; choices stay
            item.answer, item.feedback = "", ""
            count(f"{item.__tablename__}: written answer removed", 1)
    answer_ids = [a.id for a in answers]
    comments = session.scalars(select(ManualGrade).where(
        ManualGrade.submission_id.in_(sub_ids or [-1])
        | ManualGrade.quiz_answer_id.in_(answer_ids or [-1]))).all()
    for grade in comments:
        if grade.comment:
            grade.comment = ""
            count("manual_grades: comment removed", 1)
    for extension in session.scalars(select(Extension).where(Extension.user_id == user.id)):
        if extension.note:
            extension.note = ""
            count("extensions: note removed", 1)

    user.email = f"erased-{user.id}@erased.invalid"
    user.name, user.password_hash, user.is_active = "", None, False
    count("users: anonymised", 1)
    for invitation in session.scalars(select(Invitation).where(Invitation.email == old_email)):
        invitation.email, invitation.note = user.email, ""
        invitation.revoked_at = invitation.revoked_at or utcnow()
        count("invitations: address removed", 1)
    # earlier requests named the person; the record of them stays, the address goes
    for earlier in session.scalars(select(DataRequest).where(DataRequest.user_id == user.id)):
        earlier.subject = f"user {user.id}"
    if access_log_dir:
        count("access_log_lines anonymised", access_files.anonymise_user(access_log_dir, user.id))
    _record(session, "erasure", user, f"user {user.id}", operator, reference, counts)
    return counts


def _delete_lti_identities(session: Session, user_id: int) -> int:
    from ..lti.models import LtiUser

    rows = session.scalars(select(LtiUser).where(LtiUser.user_id == user_id)).all()
    for row in rows:
        session.delete(row)
    return len(rows)


def _record(session: Session, kind: str, user: User, subject: str, operator: str,
            reference: str, counts: dict) -> None:
    session.add(DataRequest(kind=kind, user_id=user.id, subject=subject, operator=operator,
                            reference=reference, counts=counts))
    session.commit()
    log.warning("data request: %s of user %s by %s%s", kind, user.id, operator or "(unnamed)",
                f" (ref {reference})" if reference else "",
                extra={"data_request": kind, "subject_user_id": user.id, "operator": operator,
                       "reference": reference})
