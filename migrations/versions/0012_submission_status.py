"""Submissions' statuses held to ``web.models.JobStatus`` by a CHECK constraint, as grading
jobs' are since 0011: a submission's status mirrors its job's, so both take the same four
values, and a stray word is refused by the database rather than shown to a student.

Written for a live, large table (docs/operators/upgrading.md, "Migrations on large tables"):
on PostgreSQL the constraint is added NOT VALID and then validated, a scan that blocks no
writes. SQLite copies the table (batch mode).

Revision ID: 0012
Revises: 0011
"""
import sqlalchemy as sa
from alembic import op

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None
# Expand only: a constraint the previous release's writes already meet (it writes these four
# words and no other; web/schema.py states the rule).
compatible_with_previous = True

STATUS_CHECK = "status IN ('queued', 'running', 'done', 'failed')"  # web.models.JOB_STATUS_CHECK


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE submissions ADD CONSTRAINT ck_submissions_status "
                   f"CHECK ({STATUS_CHECK}) NOT VALID")
        op.execute("ALTER TABLE submissions VALIDATE CONSTRAINT ck_submissions_status")
    else:
        with op.batch_alter_table("submissions", recreate="always") as batch:
            batch.create_check_constraint("status", sa.text(STATUS_CHECK))


def downgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.drop_constraint(op.f("ck_submissions_status"), type_="check")
