"""planner statistics of merged_rows after 0009's index rebuild (SQLite)

0009 dropped and rebuilt the (view, vessel, port) index of `merged_rows`. SQLite drops
a dropped index's planner statistics and a new index has none, and the upkeep analyses
the table only after writing a large view: a store upgraded through 0009 was read
without them, and SQLite then probed `latest` through that index where it should not
(on a copy of a 1,000,000-record store with the index rebuilt, p99 of 800 distinct
pages 5.9 s instead of 88 ms, 2026-11-27). This analyses the table in full, as
`store.views.upkeep._analyze` does (2 s for 2.47 million kept rows). PostgreSQL keeps
its statistics per column, not per index: nothing to do there.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27
"""
from alembic import op


revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == 'sqlite':
        op.execute('PRAGMA analysis_limit = 0')
        op.execute('ANALYZE merged_rows')


def downgrade() -> None:
    pass  # statistics are no schema
