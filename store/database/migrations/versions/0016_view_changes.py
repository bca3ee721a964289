"""the change feed's record of each view's writes (issue 46)

`merged_views` gains `seq`, the view's own sequence number (bumped by each write that
changes its rows, under the lock that write holds on the view), and `generation`
(random; drawn anew when a view is made or written whole). `view_changes` holds, per
write, the (vessel key, port) pairs whose rows changed and the ids of rows that left,
which `GET /v1/lineups/changes` reads (`store.views.changes`). Existing views start at
seq 0 with a generation of their own; their log starts empty.

Revision ID: 0016
Revises: 0014
Create Date: 2026-12-04
"""
import uuid

from alembic import op
import sqlalchemy as sa


revision = '0016'
down_revision = '0014'
branch_labels = None
depends_on = None

_ID = sa.String(24).with_variant(sa.String(24, collation='C'), 'postgresql')


def upgrade() -> None:
    with op.batch_alter_table('merged_views') as batch:
        batch.add_column(sa.Column('seq', sa.BigInteger(), nullable=False, server_default='0'))
        batch.add_column(sa.Column('generation', sa.String(32), nullable=False, server_default=''))
    views = sa.table('merged_views', sa.column('id', sa.Integer), sa.column('generation', sa.String))
    connection = op.get_bind()
    for (view_id,) in connection.execute(sa.select(views.c.id)).all():
        connection.execute(views.update().where(views.c.id == view_id).values(generation=uuid.uuid4().hex))
    op.create_table(
        'view_changes',
        sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), primary_key=True),
        sa.Column('view_id', sa.Integer(), sa.ForeignKey('merged_views.id', ondelete='CASCADE'), nullable=False),
        sa.Column('seq', sa.BigInteger(), nullable=False),
        sa.Column('source_id', sa.String(36), nullable=False),
        sa.Column('vessel_key', sa.String(220), nullable=True),
        sa.Column('port_unlocode', sa.String(5), nullable=True),
        sa.Column('row_id', _ID, nullable=True),
        sa.Column('noted_at', sa.DateTime(), nullable=False),
    )
    op.create_index('ix_view_changes_view_seq', 'view_changes', ['view_id', 'seq'])


def downgrade() -> None:
    op.drop_index('ix_view_changes_view_seq', table_name='view_changes')
    op.drop_table('view_changes')
    with op.batch_alter_table('merged_views') as batch:
        batch.drop_column('generation')
        batch.drop_column('seq')
