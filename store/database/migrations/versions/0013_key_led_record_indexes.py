"""record indexes led by the vessel key and the name key, not the feed

The upkeep of the kept views looks records up by vessel key and by name key among
every feed of the views it brings up to date (`store.views.records`). Led by the
feed, each key was a probe per feed: a daily update's ~2,000 keys of twenty feeds,
40,000 probes, which PostgreSQL's planner rightly took for more than a scan of every
record (three scans of 0.25-0.5 s in a 1,000,000-record update). Led by the key, the
feed beside it, a key is one probe whatever the number of feeds; the indexes still
hold every column the lookups read. Measured at 1,000,000 records (20 feeds, 7
buyers, 2026-11-29): on PostgreSQL the update's lookups 1.09 -> 0.70-0.85 s, the
update 4.1-5.1 -> 3.1-4.2 s (noisy: the table bloats, autovacuum being off); on SQLite
the lookups 0.32-0.55 -> 0.25-0.34 s, the update 2.94-4.09 -> 2.60-3.65 s (four
alternating pairs on copies of one store), once the planner has the table's
statistics: without them SQLite read a list of names through the (feed, ref) key, and
the update took 8.8-9.1 s. So the table is analysed here (as an ingest of a tenth of
the records or more does: `store.database.db.analyze_if_stale`).

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-29
"""
from alembic import op


revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('records', schema=None) as batch_op:
        batch_op.drop_index('ix_records_feed_vessel')
        batch_op.drop_index('ix_records_feed_name')
        batch_op.create_index(
            'ix_records_vessel', ['vessel_key', 'port_unlocode', 'feed_id', 'name_key', 'commodity'], unique=False
        )
        batch_op.create_index('ix_records_name', ['name_key', 'vessel_key', 'feed_id', 'commodity'], unique=False)
    if op.get_bind().dialect.name == 'sqlite':
        op.execute('PRAGMA analysis_limit = 0')
    op.execute('ANALYZE records')


def downgrade() -> None:
    with op.batch_alter_table('records', schema=None) as batch_op:
        batch_op.drop_index('ix_records_name')
        batch_op.drop_index('ix_records_vessel')
        batch_op.create_index(
            'ix_records_feed_vessel', ['feed_id', 'vessel_key', 'name_key', 'port_unlocode', 'commodity'], unique=False
        )
        batch_op.create_index('ix_records_feed_name', ['feed_id', 'name_key', 'vessel_key', 'commodity'], unique=False)
