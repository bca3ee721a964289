"""drop the claims of merged views

`merged_views.claimed_at` marked a view that a process was building, so that the
others waited for it rather than built it too; a mark older than ten minutes was
taken to be a dead process's. A worker killed in the middle of a build (a server
process replaced under load) left its mark, and every reader of that view waited for
it, for minutes, with a server thread each. The build's own transaction now holds
the view (PostgreSQL's lock of the row, SQLite's write lock: `store.views.upkeep`),
which the database drops with the process's connection: the column has no use.

On SQLite the column goes with `ALTER TABLE … DROP COLUMN` (SQLite 3.35 and later),
as in 0008.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28
"""
from alembic import op
import sqlalchemy as sa


revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == 'sqlite':
        import sqlite3

        if sqlite3.sqlite_version_info < (3, 35):
            raise RuntimeError(
                f'Migration 0012 needs SQLite 3.35 or later to drop a column; this Python has {sqlite3.sqlite_version}.'
            )
        op.execute('ALTER TABLE merged_views DROP COLUMN claimed_at')
    else:
        op.drop_column('merged_views', 'claimed_at')


def downgrade() -> None:
    op.add_column('merged_views', sa.Column('claimed_at', sa.DateTime(), nullable=True))
