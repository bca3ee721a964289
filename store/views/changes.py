"""What each write of a kept view changed, for the change feed (issue 46; table
`view_changes`).

Whatever writes a view's rows (`store.views.upkeep.bring_up_to_date`: an ingest's
upkeep, a commodity mapping's, a reader's or a subscription change's build) holds the
view (PostgreSQL: its row locked; SQLite: the write lock) and, in the same
transaction, `note`s what changed: the view's sequence number `seq` goes up by one,
and the (vessel key, port) pairs whose rows were inserted, updated or deleted, and the
ids that left the view, are written under it. Because the number is bumped under the
view's lock, a view's changes commit in the order of their numbers: a reader that has
seen everything up to number S misses nothing by reading the numbers above S (a
sequence shared by every view would let a reader pass a number whose transaction has
not committed yet). What is written costs what changed, not what is stored.

A view written whole (a change too large to list, a log that does not reach back)
is listed like any other write when it is small (`LISTED_ROWS`: every pair of its old
and new rows, and the ids that left); a larger one is not: an `all` view draws a new
`generation`, and in the `by_source` view the feed whose rows were written whole is
noted with no pair (`vessel_key` None); a change-feed cursor from before either has
expired (`store.views.change_feed`). The record is kept for `RETENTION` (`prune`).
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass, field

from sqlalchemy import delete, func, insert, select
from sqlalchemy.orm import Session

from store.database.schema import MergedRow, MergedView, ViewChange
from store.fields import stored_now
from store.views.stored import Rewrite

#: How long a view's changes are kept: a cursor older than this has expired.
RETENTION = dt.timedelta(days=7)
#: The `source_id` of a change of an `all` view (its rows are not one feed's).
EVERY_FEED = ""
#: A view (in the `by_source` view, a feed's rows) of at most this many rows that is
#: written whole is listed pair by pair (`keys`, `Written.add_whole`): its readers
#: stay in step. A larger one draws a new generation, and its cursors expire.
LISTED_ROWS = 20_000


@dataclass
class Written:
    """What the writes of one view in one transaction changed, gathered until `note`:
    (feed, vessel key, port) of changed rows, (feed, vessel key, port, id) of ids
    that left, and the feeds whose rows were written whole (`EVERY_FEED`: the whole
    view). The feed is `EVERY_FEED` but in the `by_source` view."""

    pairs: set[tuple[str, str, str]] = field(default_factory=set)
    gone: set[tuple[str, str, str, str]] = field(default_factory=set)
    whole: set[str] = field(default_factory=set)

    def add(self, rewrite: Rewrite, source: str = EVERY_FEED) -> None:
        """Take what one `replace_pair_rows` changed, of the feed `source`."""
        self.pairs |= {(source, vessel, port) for vessel, port in rewrite.pairs}
        self.gone |= {(source, vessel, port, row_id) for vessel, port, row_id in rewrite.gone}

    def add_whole(self, before: set[tuple[str, str, str]], after: set[tuple[str, str, str]], source: str = EVERY_FEED) -> None:
        """Take a write of the view's (the feed's) rows whole, listed: `before` and
        `after` are its rows' (vessel key, port, id); every pair of either changed."""
        ids = {row_id for _, _, row_id in after}
        self.pairs |= {(source, vessel, port) for vessel, port, _ in before | after}
        self.gone |= {(source, vessel, port, row_id) for vessel, port, row_id in before if row_id not in ids}

    def __bool__(self) -> bool:
        return bool(self.pairs or self.gone or self.whole)


def note(session: Session, view: MergedView, written: Written) -> None:
    """Record `written` as the view's next change, in the caller's transaction, which
    holds the view. Nothing changed, nothing is noted (and `seq` stays). The whole
    view written: a new generation, and its older changes are forgotten."""
    if not written:
        return
    now = stored_now()
    view.seq = (view.seq or 0) + 1
    if EVERY_FEED in written.whole:
        view.generation = uuid.uuid4().hex
        session.execute(delete(ViewChange).where(ViewChange.view_id == view.id))
        return
    base = {"view_id": view.id, "seq": view.seq, "noted_at": now}
    rows = [{**base, "source_id": feed, "vessel_key": None, "port_unlocode": None, "row_id": None} for feed in sorted(written.whole)]
    rows += [
        {**base, "source_id": feed, "vessel_key": vessel, "port_unlocode": port, "row_id": None}
        for feed, vessel, port in sorted(written.pairs)
    ]
    rows += [
        {**base, "source_id": feed, "vessel_key": vessel, "port_unlocode": port, "row_id": row_id}
        for feed, vessel, port, row_id in sorted(written.gone)
    ]
    session.execute(insert(ViewChange), rows)
    prune(session, view.id, now)


def prune(session: Session, view_id: int, now: dt.datetime) -> None:
    """Forget the view's changes older than `RETENTION`. The oldest is looked at
    first (by the (view, seq) index): most writes find nothing to forget."""
    cutoff = now - RETENTION
    oldest = session.execute(
        select(ViewChange.noted_at).where(ViewChange.view_id == view_id).order_by(ViewChange.seq).limit(1)
    ).scalar()
    if oldest is not None and oldest < cutoff:
        session.execute(delete(ViewChange).where(ViewChange.view_id == view_id, ViewChange.noted_at < cutoff))


def keys(session: Session, view_id: int, source: str | None = None) -> set[tuple[str, str, str]]:
    """The (vessel key, port, id) of the view's rows (of the feed `source`), read from
    the (view, vessel, port, feed) index, which holds the id beside them."""
    statement = select(MergedRow.vessel_key, MergedRow.port_unlocode, MergedRow.id).where(MergedRow.view_id == view_id)
    if source is not None:
        statement = statement.where(MergedRow.source_id == source)
    return {tuple(row) for row in session.connection().execute(statement)}


def oldest_seq(session: Session, view_id: int):
    """The lowest sequence number the view's record still holds (None: none)."""
    return session.execute(select(func.min(ViewChange.seq)).where(ViewChange.view_id == view_id)).scalar()
