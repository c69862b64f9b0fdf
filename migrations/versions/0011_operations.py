"""Operations: the migration chain recorded for older code (``schema_revisions``).

Revision ID: 0011
Revises: 0009 (the lead chains it after 0010 when merging)
"""
import sqlalchemy as sa
from alembic import op

revision = '0011'
down_revision = '0009'
branch_labels = None
depends_on = None
# Expand only: new tables and columns the previous release's code never reads, and
# constraints its writes already meet (web/schema.py states the rule).
compatible_with_previous = True


def upgrade() -> None:
    op.create_table(
        "schema_revisions",
        sa.Column("revision", sa.String(length=64), nullable=False),
        sa.Column("down_revision", sa.String(length=64), nullable=True),
        sa.Column("compatible_with_previous", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("revision", name=op.f("pk_schema_revisions")),
    )


def downgrade() -> None:
    op.drop_table("schema_revisions")
