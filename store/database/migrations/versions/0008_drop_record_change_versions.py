"""drop record change versions

`records.changed_version` (migration 0002) noted the feed's data version at each
record's last change, for per-process merge caches that re-read only what changed.
The kept views (issue 15) replaced those caches, and their upkeep reads the change
log (`vessel_changes`) instead: nothing read the column any longer, while every ingest
wrote it and its index `(feed_id, changed_version)`, one of the records' b-trees an
insert goes through (and the index SQLite's planner once walked for every record of
the feeds, for a row-value IN list).

On SQLite the column goes with `ALTER TABLE … DROP COLUMN` (SQLite 3.35 and later),
not Alembic's batch copy of the table: dropping the old `records` table of that copy
with foreign keys on fails as soon as a revision refers to a record.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-27
"""
from alembic import op
import sqlalchemy as sa


revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index('ix_records_feed_changed', table_name='records')
    if op.get_bind().dialect.name == 'sqlite':
        import sqlite3

        if sqlite3.sqlite_version_info < (3, 35):
            raise RuntimeError(
                f'Migration 0008 needs SQLite 3.35 or later to drop a column; this Python has {sqlite3.sqlite_version}.'
            )
        op.execute('ALTER TABLE records DROP COLUMN changed_version')
    else:
        op.drop_column('records', 'changed_version')


def downgrade() -> None:
    op.add_column('records', sa.Column('changed_version', sa.Integer(), server_default='0', nullable=False))
    op.create_index('ix_records_feed_changed', 'records', ['feed_id', 'changed_version'], unique=False)
