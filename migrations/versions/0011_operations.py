"""Operations: the migration chain recorded for older code (``schema_revisions``),
submissions' public ids (links and receipts that a restore cannot hand out again), and the
record of data-protection requests (``data_requests``); grading jobs' statuses held to
``web.models.JobStatus`` by a CHECK constraint.

Written for a live, large table (docs/operators/upgrading.md, "Migrations on large
tables"): on PostgreSQL the new column is added without a default (no table rewrite), its
default is set for new rows, the existing rows are filled in batches, and the unique index
is built CONCURRENTLY outside the transaction. SQLite copies the table (batch mode), which
evaluates the column's default for every existing row.

Revision ID: 0011
Revises: 0010
"""
import sqlalchemy as sa
from alembic import op

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None
# Expand only: new tables and columns the previous release's code never reads, a column
# the database fills by itself where the previous release inserts without it, and
# constraints its writes already meet (web/schema.py states the rule).
compatible_with_previous = True

# web.public_ids.SQL_DEFAULT, verbatim: 16 random hex characters drawn per row.
PG_DEFAULT = "substr(md5(random()::text || clock_timestamp()::text), 1, 16)"
SQLITE_DEFAULT = "lower(hex(randomblob(8)))"
JOB_STATUS_CHECK = "status IN ('queued', 'running', 'done', 'failed')"  # web.models.JobStatus
BATCH = 10_000  # rows per UPDATE while filling public ids on PostgreSQL


def upgrade() -> None:
    op.create_table(
        "schema_revisions",
        sa.Column("revision", sa.String(length=64), nullable=False),
        sa.Column("down_revision", sa.String(length=64), nullable=True),
        sa.Column("compatible_with_previous", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("revision", name=op.f("pk_schema_revisions")),
    )
    op.create_table(
        "data_requests",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=10), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("subject", sa.String(length=254), nullable=False),
        sa.Column("operator", sa.String(length=200), nullable=False),
        sa.Column("reference", sa.String(length=200), nullable=False),
        sa.Column("counts", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="SET NULL",
                                name=op.f("fk_data_requests_user_id_users")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_data_requests")),
    )
    op.create_index(op.f("ix_data_requests_user_id"), "data_requests", ["user_id"])
    if op.get_bind().dialect.name == "postgresql":
        _public_ids_postgresql()
        # NOT VALID, then VALIDATE: the scan runs without blocking the table's writes
        op.execute(f"ALTER TABLE grading_jobs ADD CONSTRAINT ck_grading_jobs_status "
                   f"CHECK ({JOB_STATUS_CHECK}) NOT VALID")
        op.execute("ALTER TABLE grading_jobs VALIDATE CONSTRAINT ck_grading_jobs_status")
    else:
        with op.batch_alter_table("submissions", recreate="always") as batch:
            batch.add_column(sa.Column("public_id", sa.String(length=16), nullable=False,
                                       server_default=sa.text(f"({SQLITE_DEFAULT})")))
            batch.create_index("ix_submissions_public_id", ["public_id"], unique=True)
        with op.batch_alter_table("grading_jobs", recreate="always") as batch:
            batch.create_check_constraint("status", sa.text(JOB_STATUS_CHECK))


def _public_ids_postgresql() -> None:
    op.add_column("submissions", sa.Column("public_id", sa.String(length=16), nullable=True))
    op.alter_column("submissions", "public_id", server_default=sa.text(PG_DEFAULT))
    while op.get_bind().execute(sa.text(
            f"UPDATE submissions SET public_id = {PG_DEFAULT} WHERE id IN "
            f"(SELECT id FROM submissions WHERE public_id IS NULL LIMIT {BATCH})")).rowcount:
        pass
    with op.get_context().autocommit_block():  # CONCURRENTLY: writes go on while it builds
        op.create_index("ix_submissions_public_id", "submissions", ["public_id"], unique=True,
                        postgresql_concurrently=True)
    op.alter_column("submissions", "public_id", nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("grading_jobs") as batch:
        batch.drop_constraint(op.f("ck_grading_jobs_status"), type_="check")
    with op.batch_alter_table("submissions") as batch:
        batch.drop_index("ix_submissions_public_id")
        batch.drop_column("public_id")
    op.drop_index(op.f("ix_data_requests_user_id"), table_name="data_requests")
    op.drop_table("data_requests")
    op.drop_table("schema_revisions")
