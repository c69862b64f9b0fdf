"""Submission references that stay true after a restore: public ids, not sequence values.

A submission's integer id is its table's next sequence value. A database restored from a
backup hands out again every id issued after the backup, so a link, a receipt, a log line or
an LMS comment naming "submission 92" would then name someone else's work. Each submission
also gets ``public_id``: 16 random hex characters (64 bits) drawn where it is inserted, never
drawn again after a restore. Links and receipts given out of the service use it; the API
and the page link accept either form.

The database draws it too (the column's default, migration 0011), so a submission inserted
by the previous release during a rolling upgrade gets one as well.
"""
from __future__ import annotations

import re

from flask import Blueprint, abort, current_app
from sqlalchemy import select
from sqlalchemy.orm import Session

from .models import Submission, new_public_id  # noqa: F401 (drawn by the model's default)

PUBLIC_ID = re.compile(r"[0-9a-f]{16}")


MAX_INTEGER_ID = 2**31 - 1  # the id column is a 32-bit integer on PostgreSQL


def submission_id_for(session: Session, ref: str | int) -> int | None:
    """The integer id a reference names: a public id, or (older links) the integer itself.

    Sixteen characters are a public id even when they are all digits (one id in about 1,800 is:
    read as an integer it named another submission, or past PostgreSQL's integer range, a 500)."""
    ref = str(ref).strip().lower()
    if PUBLIC_ID.fullmatch(ref):
        return session.scalar(select(Submission.id).where(Submission.public_id == ref))
    if ref.isascii() and ref.isdigit() and int(ref) <= MAX_INTEGER_ID:
        return int(ref)
    return None


# The page link handed out with a submission (the API's page_url): the submission's page,
# found by public id when it is opened, so after a restore it is the right page or a 404.
# The page itself (sign-in, who may see it) is the student blueprint's.
bp = Blueprint("links", __name__)


@bp.get("/s/<submission_id>")
def submission_page(submission_id: str):
    from .extensions import db_session

    found = submission_id_for(db_session(), submission_id)
    if found is None:
        abort(404)
    return current_app.view_functions["student.submission"](submission_id=found)
