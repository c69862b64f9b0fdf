"""per-student extensions (an own deadline, extra attempts); the language of a quiz answer

Revision ID: 0006
Revises: 0004 (the lead relinks the chain when merging)
Create Date: 2026-12-01 10:50:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('extensions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('assignment_id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('deadline', sa.DateTime(), nullable=True),
    sa.Column('extra_attempts', sa.Integer(), nullable=False),
    sa.Column('note', sa.String(length=200), nullable=False),
    sa.Column('granted_by_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['assignment_id'], ['assignments.id'], name=op.f('fk_extensions_assignment_id_assignments'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['granted_by_id'], ['users.id'], name=op.f('fk_extensions_granted_by_id_users'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_extensions_user_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_extensions')),
    sa.UniqueConstraint('assignment_id', 'user_id', name='uq_extensions_assignment_user')
    )
    with op.batch_alter_table('extensions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_extensions_user_id'), ['user_id'], unique=False)
    with op.batch_alter_table('quiz_answers', schema=None) as batch_op:
        batch_op.add_column(sa.Column('lang', sa.String(length=10), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('quiz_answers', schema=None) as batch_op:
        batch_op.drop_column('lang')
    with op.batch_alter_table('extensions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_extensions_user_id'))
    op.drop_table('extensions')
