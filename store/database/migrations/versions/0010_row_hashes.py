"""merged rows compared by hash in the (vessel) index

A view's upkeep replaces the rows of the (vessel, port) pairs a change touched, and
writes only the rows that differ. It read each stored row of those pairs whole from
the table (a lookup per row: ~9,300 rows, 0.6 s of a 1,000-record daily update at
1,000,000 records) to compare it with its new merge. Now each row keeps a hash of
its values (`row_hash`), and the (view, vessel, port, feed) index holds the row's
key, `is_top` and that hash: the comparison reads the index alone. Rows written
before have no hash, and count as changed the first time an update touches them.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27
"""
import sqlalchemy as sa
from alembic import op


revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None

_BEFORE = ['view_id', 'vessel_key', 'port_unlocode', 'source_id']
_AFTER = [*_BEFORE, 'sort_key', 'id', 'is_top', 'row_hash']


def upgrade() -> None:
    op.add_column('merged_rows', sa.Column('row_hash', sa.BigInteger(), nullable=True))
    op.drop_index('ix_merged_rows_vessel', table_name='merged_rows')
    op.create_index('ix_merged_rows_vessel', 'merged_rows', _AFTER, unique=False)
    _analyze()


def downgrade() -> None:
    op.drop_index('ix_merged_rows_vessel', table_name='merged_rows')
    op.create_index('ix_merged_rows_vessel', 'merged_rows', _BEFORE, unique=False)
    # SQLite (3.35 and later) drops a column in place, keeping the table WITHOUT
    # ROWID, which a batch's copy of the table would not.
    op.execute('ALTER TABLE merged_rows DROP COLUMN row_hash')
    _analyze()


def _analyze() -> None:
    """SQLite drops a dropped index's planner statistics, and a new index has none:
    without them it probed `latest` through this index where it should not (p99 of
    800 distinct pages at 1,000,000 records 88 ms -> 5.9 s, 2026-11-27). The whole
    table is read, as `store.views.upkeep._analyze` does (2 s for 2.47 million
    kept rows). PostgreSQL keeps its statistics per column, not per index."""
    if op.get_bind().dialect.name == 'sqlite':
        op.execute('PRAGMA analysis_limit = 0')
        op.execute('ANALYZE merged_rows')
