"""LTI 1.3: tool keys, platform registrations, launches mapped to users, courses and
assignments, the grade passback outbox, launch state

Revision ID: 0003
Revises: 0001
Create Date: 2026-12-01 09:15:41.433645
"""
from alembic import op
import sqlalchemy as sa


revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('lti_keys',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('kid', sa.String(length=64), nullable=False),
    sa.Column('private_pem', sa.Text(), nullable=False),
    sa.Column('public_pem', sa.Text(), nullable=False),
    sa.Column('active', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_lti_keys')),
    sa.UniqueConstraint('kid', name=op.f('uq_lti_keys_kid'))
    )
    op.create_table('lti_launch_data',
    sa.Column('key', sa.String(length=255), nullable=False),
    sa.Column('value', sa.JSON(), nullable=True),
    sa.Column('expires_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('key', name=op.f('pk_lti_launch_data'))
    )
    with op.batch_alter_table('lti_launch_data', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_lti_launch_data_expires_at'), ['expires_at'], unique=False)

    op.create_table('lti_platforms',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('issuer', sa.String(length=255), nullable=False),
    sa.Column('client_id', sa.String(length=255), nullable=False),
    sa.Column('auth_login_url', sa.Text(), nullable=False),
    sa.Column('auth_token_url', sa.Text(), nullable=False),
    sa.Column('auth_audience', sa.Text(), nullable=True),
    sa.Column('key_set_url', sa.Text(), nullable=False),
    sa.Column('deployment_ids', sa.JSON(), nullable=False),
    sa.Column('course_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['course_id'], ['courses.id'], name=op.f('fk_lti_platforms_course_id_courses'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_lti_platforms')),
    sa.UniqueConstraint('issuer', 'client_id', name='uq_lti_platforms_issuer')
    )
    op.create_table('lti_contexts',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('platform_id', sa.Integer(), nullable=False),
    sa.Column('context_id', sa.String(length=255), nullable=False),
    sa.Column('title', sa.String(length=255), nullable=False),
    sa.Column('course_id', sa.Integer(), nullable=False),
    sa.Column('memberships_url', sa.Text(), nullable=True),
    sa.Column('roster_synced_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['course_id'], ['courses.id'], name=op.f('fk_lti_contexts_course_id_courses'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['platform_id'], ['lti_platforms.id'], name=op.f('fk_lti_contexts_platform_id_lti_platforms'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_lti_contexts')),
    sa.UniqueConstraint('platform_id', 'context_id', name='uq_lti_contexts_platform_context')
    )
    op.create_table('lti_users',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('platform_id', sa.Integer(), nullable=False),
    sa.Column('sub', sa.String(length=255), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['platform_id'], ['lti_platforms.id'], name=op.f('fk_lti_users_platform_id_lti_platforms'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_lti_users_user_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_lti_users')),
    sa.UniqueConstraint('platform_id', 'sub', name='uq_lti_users_platform_sub')
    )
    with op.batch_alter_table('lti_users', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_lti_users_user_id'), ['user_id'], unique=False)

    op.create_table('lti_resource_links',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('platform_id', sa.Integer(), nullable=False),
    sa.Column('resource_link_id', sa.String(length=255), nullable=False),
    sa.Column('deployment_id', sa.String(length=255), nullable=False),
    sa.Column('assignment_id', sa.Integer(), nullable=False),
    sa.Column('context_id', sa.Integer(), nullable=True),
    sa.Column('ags', sa.JSON(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['assignment_id'], ['assignments.id'], name=op.f('fk_lti_resource_links_assignment_id_assignments'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['context_id'], ['lti_contexts.id'], name=op.f('fk_lti_resource_links_context_id_lti_contexts'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['platform_id'], ['lti_platforms.id'], name=op.f('fk_lti_resource_links_platform_id_lti_platforms'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_lti_resource_links')),
    sa.UniqueConstraint('platform_id', 'resource_link_id', name='uq_lti_resource_links_platform_link')
    )
    with op.batch_alter_table('lti_resource_links', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_lti_resource_links_assignment_id'), ['assignment_id'], unique=False)

    op.create_table('lti_score_syncs',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('link_id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('lti_sub', sa.String(length=255), nullable=False),
    sa.Column('score_given', sa.Float(), nullable=False),
    sa.Column('score_maximum', sa.Float(), nullable=False),
    sa.Column('score_timestamp', sa.DateTime(), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('sent_version', sa.Integer(), nullable=False),
    sa.Column('claim', sa.Integer(), nullable=False),
    sa.Column('lease_until', sa.DateTime(), nullable=True),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('next_attempt_at', sa.DateTime(), nullable=False),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('sent_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['link_id'], ['lti_resource_links.id'], name=op.f('fk_lti_score_syncs_link_id_lti_resource_links'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_lti_score_syncs_user_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_lti_score_syncs')),
    sa.UniqueConstraint('link_id', 'user_id', name='uq_lti_score_syncs_link_user')
    )
    with op.batch_alter_table('lti_score_syncs', schema=None) as batch_op:
        batch_op.create_index('ix_lti_score_syncs_due', ['next_attempt_at'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('lti_score_syncs', schema=None) as batch_op:
        batch_op.drop_index('ix_lti_score_syncs_due')

    op.drop_table('lti_score_syncs')
    with op.batch_alter_table('lti_resource_links', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_lti_resource_links_assignment_id'))

    op.drop_table('lti_resource_links')
    with op.batch_alter_table('lti_users', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_lti_users_user_id'))

    op.drop_table('lti_users')
    op.drop_table('lti_contexts')
    op.drop_table('lti_platforms')
    with op.batch_alter_table('lti_launch_data', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_lti_launch_data_expires_at'))

    op.drop_table('lti_launch_data')
    op.drop_table('lti_keys')
