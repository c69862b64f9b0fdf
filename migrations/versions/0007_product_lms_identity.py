"""what the LMS knows about a person and a link, for Canvas's gradebook CSV: the LMS's user
id, SIS user id, login id and name parts of an LTI user, the section of an enrollment, the
LMS's assignment id of a placed link

Revision ID: 0007_product
Revises: 0006 (the lead relinks the chain when merging)
Create Date: 2026-12-01 12:30:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0007_product'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('lti_users', schema=None) as batch_op:
        batch_op.add_column(sa.Column('lms_user_id', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('sis_user_id', sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column('login_id', sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column('given_name', sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column('family_name', sa.String(length=200), nullable=True))
    with op.batch_alter_table('enrollments', schema=None) as batch_op:
        batch_op.add_column(sa.Column('section', sa.String(length=255), nullable=True))
    with op.batch_alter_table('lti_resource_links', schema=None) as batch_op:
        batch_op.add_column(sa.Column('lms_assignment_id', sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('lti_resource_links', schema=None) as batch_op:
        batch_op.drop_column('lms_assignment_id')
    with op.batch_alter_table('enrollments', schema=None) as batch_op:
        batch_op.drop_column('section')
    with op.batch_alter_table('lti_users', schema=None) as batch_op:
        batch_op.drop_column('family_name')
        batch_op.drop_column('given_name')
        batch_op.drop_column('login_id')
        batch_op.drop_column('sis_user_id')
        batch_op.drop_column('lms_user_id')
