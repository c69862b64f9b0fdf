"""The claim's pick as an index look-up: the unfinished jobs in claim order.

``claim_next`` used to walk the primary key past every finished job (an OR of two statuses,
ordered by id): 35 ms a pick with 100,000 finished jobs on PostgreSQL. This partial index
holds only queued and running jobs, ordered as the claim takes them (oldest queued first).

Revision ID: 0008
Revises: 0007_product
"""
import sqlalchemy as sa
from alembic import op

revision = '0008'
down_revision = '0007_product'
branch_labels = None
depends_on = None
compatible_with_previous = True  # expand: the previous release runs on it unchanged (web/schema.py)

PENDING = "status IN ('queued', 'running')"  # web.models.PENDING_JOBS, verbatim


def upgrade() -> None:
    op.create_index("ix_grading_jobs_pending", "grading_jobs", ["queue", "queued_at", "id"],
                    postgresql_where=sa.text(PENDING), sqlite_where=sa.text(PENDING))


def downgrade() -> None:
    op.drop_index("ix_grading_jobs_pending", table_name="grading_jobs")
