"""by_source rows kept once per feed

A buyer's `merge=by_source` rows are the union of their visible feeds' own merges
(C2.6). They were kept once per buyer feed set, so each feed's rows were stored
(and brought up to date by every ingest) once for every set that held the feed: 5.2
million kept rows for 1,000,000 records and seven buyers. Now one `by_source` view
holds every feed's rows once, and a read keeps those of the reader's feeds. This
migration drops the per-set `by_source` views (the one view is built by the first
read, subscription change or ingest after it, a feed at a time), and puts the feed
into the (view, vessel, port) index: the upkeep reads one feed's rows of a pair, and
`latest` probes a pair's rows of the reader's feeds, in the index.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27
"""
from alembic import op


revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    _drop_by_source_views()
    op.drop_index('ix_merged_rows_vessel', table_name='merged_rows')
    op.create_index(
        'ix_merged_rows_vessel', 'merged_rows', ['view_id', 'vessel_key', 'port_unlocode', 'source_id'], unique=False
    )


def downgrade() -> None:
    _drop_by_source_views()  # the old code keeps them per feed set, and builds them when read
    op.drop_index('ix_merged_rows_vessel', table_name='merged_rows')
    op.create_index('ix_merged_rows_vessel', 'merged_rows', ['view_id', 'vessel_key', 'port_unlocode'], unique=False)


def _drop_by_source_views() -> None:
    op.execute(
        "DELETE FROM merged_rows WHERE view_id IN (SELECT id FROM merged_views WHERE mode = 'by_source')"
    )
    op.execute("DELETE FROM merged_views WHERE mode = 'by_source'")
