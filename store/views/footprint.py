"""What the kept views cost on disk (issue 47): `lineups db status` and `lineups
views prune` list each view with its rows, its estimated size and when a buyer last
read it.

Every view's rows share one table (`merged_rows`) and its indexes, so a view's size
is an estimate: the bytes of the table and its indexes, shared out by rows. They are
measured by SQLite's `dbstat` table (which reads every page of the table and its
indexes: some seconds a gigabyte), by `pg_total_relation_size` on PostgreSQL (the
table with its indexes and TOAST, from the catalogue: at once).
"""

from __future__ import annotations

from sqlalchemy import select, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from store.database.schema import MergedView, ViewRead
from store.fields import format_time


def rows_bytes(session: Session) -> int | None:
    """The bytes on disk of `merged_rows` and its indexes; None when the back end
    cannot say (an SQLite built without `dbstat`)."""
    if session.get_bind().dialect.name == "postgresql":
        return int(session.scalar(text("SELECT pg_total_relation_size('merged_rows')")))
    try:
        found = session.scalar(text(
            "SELECT SUM(pgsize) FROM dbstat('main', 1)"
            " WHERE name IN (SELECT name FROM sqlite_master WHERE tbl_name = 'merged_rows')"
        ))
    except OperationalError:
        return None
    return int(found or 0)


def view_sizes(session: Session) -> list[dict]:
    """Every kept view: id, mode, feeds (how many), state, rows, `bytes` (its share
    of the table's bytes by rows; None when unknown), `read_at` (when a buyer last
    read it; None: never), `unused_since` (None: a buyer can read it)."""
    views = session.execute(
        select(MergedView.id, MergedView.mode, MergedView.feeds, MergedView.state, MergedView.row_count,
               ViewRead.read_at, MergedView.unused_since)
        .outerjoin(ViewRead, ViewRead.view_id == MergedView.id)
        .order_by(MergedView.id)
    ).all()
    total_rows = sum(view.row_count for view in views)
    total_bytes = rows_bytes(session) if views else 0
    per_row = total_bytes / total_rows if total_bytes is not None and total_rows else None
    return [
        {
            "id": view.id, "mode": view.mode, "feeds": len(view.feeds), "state": view.state, "rows": view.row_count,
            "bytes": None if per_row is None else round(per_row * view.row_count),
            "read_at": format_time(view.read_at), "unused_since": format_time(view.unused_since),
        }
        for view in views
    ]
