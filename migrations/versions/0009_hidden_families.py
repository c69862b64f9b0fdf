"""Check families whose results students see only after the deadline, per assignment.

Revision ID: 0009
Revises: 0008
"""
import sqlalchemy as sa
from alembic import op

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None
compatible_with_previous = True  # expand: the previous release runs on it unchanged (web/schema.py)


def upgrade() -> None:
    with op.batch_alter_table("assignments") as batch:
        batch.add_column(sa.Column("hidden_families", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("assignments") as batch:
        batch.drop_column("hidden_families")
