"""an index of merged_rows on (view, port, commodity, sort key, id)

A page with a port and a commodity that is rare there walked the port's rows in date
order, a table lookup each, to find few or none (in the `by_source` view, the port's
rows of every feed): the slowest distinct pages of the mixed workload. This index is
that combination's own range. Measured in process on a copy of a 1,000,000-record
store, 760 distinct first pages of the mixed workload, two runs each (2026-11-27):
mean 7.4-7.6 -> 6.6-6.8 ms, p99 90-96 -> 64-68 ms, the `by_source` pages with a port
and a commodity 26 -> 16 ms; the cost, a sixth more index work for every upkeep: a
1,000-record update ~0.4 s longer (medians of three alternating runs 2.6 -> 3.0 s),
5% more bytes.
On SQLite the table is analysed again, so that the planner knows the new index
(`store.views.upkeep._analyze` does the same after a large view is written).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27
"""
from alembic import op


revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        'ix_merged_rows_port_commodity', 'merged_rows',
        ['view_id', 'port_unlocode', 'commodity_normalized', 'sort_key', 'id'],
    )
    if op.get_bind().dialect.name == 'sqlite':
        op.execute('PRAGMA analysis_limit = 0')
        op.execute('ANALYZE merged_rows')


def downgrade() -> None:
    op.drop_index('ix_merged_rows_port_commodity', table_name='merged_rows')
