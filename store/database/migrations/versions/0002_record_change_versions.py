"""record change versions

Each record notes the feed's data_version at its last change, so that the lineup
service re-reads (and re-merges) only what changed since the version it holds.
Existing records get 0: a cache built after the upgrade loads them whole anyway.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23 10:28:43.371225
"""
from alembic import op
import sqlalchemy as sa


revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('records', schema=None) as batch_op:
        batch_op.add_column(sa.Column('changed_version', sa.Integer(), server_default='0', nullable=False))
        batch_op.create_index('ix_records_feed_changed', ['feed_id', 'changed_version'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('records', schema=None) as batch_op:
        batch_op.drop_index('ix_records_feed_changed')
        batch_op.drop_column('changed_version')
