"""quiz integrity: answer tries, attempt policy, quiz code answers as grading jobs

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01 09:30:00

- ``quiz_tries``: every answer sent, the first kept for the statistics.
- ``assignments.answer_policy`` / ``try_penalty``: one try, or several with a penalty.
- ``quiz_answers.state``: open, pending (a worker grades it) or final.
- ``grading_jobs.quiz_try_id``: a job grades a submission or a quiz code answer, so
  ``submission_id`` becomes nullable.
"""
from alembic import op
import sqlalchemy as sa


revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('quiz_tries',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('quiz_answer_id', sa.Integer(), nullable=False),
    sa.Column('number', sa.Integer(), nullable=False),
    sa.Column('answer', sa.JSON(), nullable=True),
    sa.Column('status', sa.String(length=10), nullable=False),
    sa.Column('correct', sa.Boolean(), nullable=True),
    sa.Column('fraction', sa.Float(), nullable=True),
    sa.Column('points', sa.Float(), nullable=False),
    sa.Column('max_points', sa.Float(), nullable=False),
    sa.Column('feedback', sa.Text(), nullable=False),
    sa.Column('details', sa.JSON(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('graded_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['quiz_answer_id'], ['quiz_answers.id'], name=op.f('fk_quiz_tries_quiz_answer_id_quiz_answers'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_quiz_tries')),
    sa.UniqueConstraint('quiz_answer_id', 'number', name='uq_quiz_tries_answer_number')
    )
    with op.batch_alter_table('quiz_tries', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_quiz_tries_quiz_answer_id'), ['quiz_answer_id'], unique=False)

    with op.batch_alter_table('assignments', schema=None) as batch_op:
        batch_op.add_column(sa.Column('answer_policy', sa.String(length=20), server_default='single_try', nullable=False))
        batch_op.add_column(sa.Column('try_penalty', sa.Float(), server_default='0.3333333333', nullable=False))

    with op.batch_alter_table('quiz_answers', schema=None) as batch_op:
        batch_op.add_column(sa.Column('state', sa.String(length=10), server_default='open', nullable=False))

    with op.batch_alter_table('grading_jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('quiz_try_id', sa.Integer(), nullable=True))
        batch_op.alter_column('submission_id', existing_type=sa.Integer(), nullable=True)
        batch_op.create_unique_constraint(batch_op.f('uq_grading_jobs_quiz_try_id'), ['quiz_try_id'])
        batch_op.create_foreign_key(batch_op.f('fk_grading_jobs_quiz_try_id_quiz_tries'), 'quiz_tries', ['quiz_try_id'], ['id'], ondelete='CASCADE')


def downgrade() -> None:
    op.execute("DELETE FROM grading_jobs WHERE submission_id IS NULL")
    with op.batch_alter_table('grading_jobs', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_grading_jobs_quiz_try_id_quiz_tries'), type_='foreignkey')
        batch_op.drop_constraint(batch_op.f('uq_grading_jobs_quiz_try_id'), type_='unique')
        batch_op.alter_column('submission_id', existing_type=sa.Integer(), nullable=False)
        batch_op.drop_column('quiz_try_id')

    with op.batch_alter_table('quiz_answers', schema=None) as batch_op:
        batch_op.drop_column('state')

    with op.batch_alter_table('assignments', schema=None) as batch_op:
        batch_op.drop_column('try_penalty')
        batch_op.drop_column('answer_policy')

    with op.batch_alter_table('quiz_tries', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_quiz_tries_quiz_answer_id'))

    op.drop_table('quiz_tries')
