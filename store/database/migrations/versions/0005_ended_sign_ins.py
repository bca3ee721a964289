"""ended explorer sign-ins

A logout in the explorer ends its sign-in for every server process (issue 17): the
sign-in's id is kept here until its cookie would have expired.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25
"""
from alembic import op
import sqlalchemy as sa


revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('ended_sign_ins',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('ended_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_ended_sign_ins_ended_at', 'ended_sign_ins', ['ended_at'])


def downgrade() -> None:
    op.drop_index('ix_ended_sign_ins_ended_at', table_name='ended_sign_ins')
    op.drop_table('ended_sign_ins')
