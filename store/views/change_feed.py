"""The change feed of a buyer's lineups (issue 46, `GET /v1/lineups/changes`): the
result of a query first, then what changed in it, so that a client that applies every
item in order (upsert by id, delete by id) holds exactly the query's result.

A reader's position (`FeedPosition`, the content of its signed cursor) names the view
it reads (id, `generation`, and in the `by_source` view its feeds) and the view's
sequence number it has seen (`seq`, `store.views.changes`):

1. **Snapshot**: the first call fixes `seq` S0, the view's number in the same read as
   the first page, and walks the result in pages as `/v1/lineups` does (keyset, C4),
   each item an upsert. Rows that change during the walk are in pairs the view's
   record lists after S0, and are sent again below: upserts are idempotent.
2. **Changes**: from `seq` S, a batch reaches up to T, the view's number when it
   starts. First a delete for every id that left the view in (S, T] ("gone"), then,
   pair by pair, for every (vessel key, port) pair written in (S, T], an upsert of
   each of its rows that is in the result now and a delete of each that is not (it
   no longer passes the filters, or `latest` now keeps another row of its pair: C3
   ranks rows within a pair). The batch's last page moves `seq` to T; `caught_up` says
   that the view's number is still T, so that nothing waits. A delete of an id that
   comes back later in the batch is followed by its upsert, since the pairs come
   after the deletes and are read afterwards.

Why this is exact: every row of a pair not written after a page was read is as that
page saw it, and every pair written after S is read again, after its last write of
the batch; its ids that left are deleted first. When a batch ends with the view's
number still T, the client's rows are the result at T.

A cursor the log can no longer serve exactly is refused, never answered with wrong
rows (`expired`): another view or generation (the buyer's feeds changed, the view was
written whole or dropped and made again), a feed written whole in the `by_source`
view, or a log pruned past its `seq` (`store.views.changes.RETENTION`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Sequence

from sqlalchemy import select, tuple_
from sqlalchemy.orm import Session

from store.database.schema import MergedView, ViewChange
from store.errors import ValidationError
from store.reference.taxonomy import Taxonomy
from store.views import changes, sql
from store.views.pages import read_page
from store.query import LineupQuery
from store.views.stored import READ_COLUMNS

#: The phases of a position: the result's pages, then the ids gone, then the pairs.
SNAPSHOT, GONE, PAIRS = "snapshot", "gone", "pairs"
#: An item: ("upsert", a row as read, `READ_COLUMNS`) or ("delete", an id).
Item = tuple[str, Any]


@dataclass(frozen=True)
class FeedPosition:
    """Where a reader of the change feed is (see the module docstring). `view` 0: a
    buyer who sees no feed, whose result is empty."""

    view: int
    generation: str
    sources: tuple[str, ...] | None
    seq: int
    to: int | None = None
    phase: str = SNAPSHOT
    after: Any = None

    def to_json(self) -> list:
        return [self.view, self.generation, self.sources, self.seq, self.to, self.phase, self.after]

    @classmethod
    def from_json(cls, data: Any) -> "FeedPosition":
        """The position of a cursor's content; raises ValidationError when it is not one."""
        try:
            view, generation, sources, seq, to, phase, after = data
            position = cls(int(view), str(generation), None if sources is None else tuple(sources), int(seq),
                           None if to is None else int(to), phase, after)
        except (TypeError, ValueError):
            raise ValidationError.parameter("cursor", "not a change-feed cursor") from None
        if phase not in (SNAPSHOT, GONE, PAIRS):
            raise ValidationError.parameter("cursor", "not a change-feed cursor")
        return position


@dataclass(frozen=True)
class ChangesPage:
    """One page of the change feed: its items in order, the position after them, and
    whether nothing more is waiting now."""

    items: list[Item]
    next: FeedPosition
    caught_up: bool


def expired(why: str) -> ValidationError:
    """The error of a cursor that cannot be served exactly: 400 VALIDATION_ERROR with
    `details.reason` "cursor_expired" (the client starts again without a cursor)."""
    return ValidationError(
        f"This change-feed cursor has expired ({why}); start again without a cursor",
        {"parameter": "cursor", "reason": "cursor_expired"},
    )


def without_feeds(position: FeedPosition | None) -> ChangesPage:
    """The change feed of a buyer who sees no feed: nothing, caught up."""
    if position is not None and position.view != 0:
        raise expired("the feeds you see have changed")
    return ChangesPage([], FeedPosition(0, "", None, 0, phase=GONE), True)


def read(
    session: Session, target: sql.Target, query: LineupQuery, taxonomy: Taxonomy, position: FeedPosition | None,
    limit: int,
) -> ChangesPage:
    """The page of the change feed after `position` (None: the first) of `query` in
    the view `target`, at most `limit` items (a pair's items are never split over
    pages, so one pair with more rows than that is a page of its own). Raises
    ValidationError (`expired`) for a position that cannot be served exactly."""
    seq, generation, mode, feeds = session.execute(
        select(MergedView.seq, MergedView.generation, MergedView.mode, MergedView.feeds).where(MergedView.id == target.view_id)
    ).one()
    # The reader's feeds in the `by_source` view, by name even when they are all its
    # feeds (a feed the view gains later is added whole, unlisted: a reader who then
    # subscribes to it must start again). An `all` view is one feed set.
    sources = target.sources if target.sources is not None or mode != "by_source" else tuple(sorted(feeds))
    if position is None:
        position = FeedPosition(target.view_id, generation, sources, seq)
    elif (position.view, position.generation, position.sources) != (target.view_id, generation, sources):
        raise expired("the view of your feeds is another one now, or was written whole")
    if position.phase == SNAPSHOT:
        return _snapshot(session, target, query, taxonomy, position, limit, seq)
    if position.to is None:
        if seq == position.seq:
            return ChangesPage([], position, True)
        position = dataclasses.replace(position, to=seq, phase=GONE, after=None)
    _check_log(session, target, position)
    items: list[Item] = []
    if position.phase == GONE:
        ids = _gone(session, target, position, limit + 1)
        items = [("delete", row_id) for row_id in ids[:limit]]
        if len(ids) > limit:
            return ChangesPage(items, dataclasses.replace(position, after=ids[limit - 1]), False)
        position = dataclasses.replace(position, phase=PAIRS, after=None)
    budget = limit - len(items)
    if budget == 0:
        return ChangesPage(items, position, False)
    pairs = _pairs(session, target, position, budget + 1)
    groups = _pair_items(session, target, query, taxonomy, pairs[:budget])
    taken = 0
    for group in groups:
        if len(items) + len(group) > limit and (items or taken):
            break
        items += group
        taken += 1
    if taken < len(pairs):
        return ChangesPage(items, dataclasses.replace(position, after=list(pairs[taken - 1]) if taken else position.after), False)
    done = dataclasses.replace(position, seq=position.to, to=None, phase=GONE, after=None)
    return ChangesPage(items, done, seq == position.to)


def _snapshot(
    session: Session, target: sql.Target, query: LineupQuery, taxonomy: Taxonomy, position: FeedPosition, limit: int,
    seq: int,
) -> ChangesPage:
    page = read_page(session, query, taxonomy, target, position.after, limit)
    items: list[Item] = [("upsert", row) for row in page.records]
    if page.next is not None:
        return ChangesPage(items, dataclasses.replace(position, after=page.next), False)
    return ChangesPage(items, dataclasses.replace(position, phase=GONE, after=None), seq == position.seq)


def _log(target: sql.Target, position: FeedPosition) -> list:
    """The reader's part of the view's record in (seq, to]: in the `by_source` view,
    the changes of their feeds."""
    clauses = [ViewChange.view_id == target.view_id, ViewChange.seq > position.seq, ViewChange.seq <= position.to]
    if target.sources is not None:
        clauses.append(ViewChange.source_id.in_(list(target.sources)))
    return clauses


def _check_log(session: Session, target: sql.Target, position: FeedPosition) -> None:
    """Raise `expired` when the record no longer reaches the position's `seq`, or a
    feed of the reader was written whole since."""
    oldest = changes.oldest_seq(session, target.view_id)
    if oldest is None or oldest > position.seq + 1:
        raise expired(f"changes are kept for {changes.RETENTION.days} days")
    whole = session.execute(
        select(ViewChange.id).where(*_log(target, position), ViewChange.vessel_key.is_(None)).limit(1)
    ).first()
    if whole is not None:
        raise expired("a feed's rows were written whole")


def _gone(session: Session, target: sql.Target, position: FeedPosition, limit: int) -> list[str]:
    statement = select(ViewChange.row_id).where(*_log(target, position), ViewChange.row_id.is_not(None)).distinct()
    if position.after is not None:
        statement = statement.where(ViewChange.row_id > str(position.after))
    return list(session.execute(statement.order_by(ViewChange.row_id).limit(limit)).scalars())


def _pairs(session: Session, target: sql.Target, position: FeedPosition, limit: int) -> list[tuple[str, str]]:
    statement = (
        select(ViewChange.vessel_key, ViewChange.port_unlocode)
        .where(*_log(target, position), ViewChange.vessel_key.is_not(None))
        .distinct()
    )
    if position.after is not None:
        vessel, port = position.after
        statement = statement.where(tuple_(ViewChange.vessel_key, ViewChange.port_unlocode) > tuple_(vessel, port))
    ordered = statement.order_by(ViewChange.vessel_key, ViewChange.port_unlocode).limit(limit)
    return [(vessel, port) for vessel, port in session.execute(ordered)]


def _pair_items(
    session: Session, target: sql.Target, query: LineupQuery, taxonomy: Taxonomy, pairs: Sequence[tuple[str, str]]
) -> list[list[Item]]:
    """Per pair, in order: a delete of each of its rows not in the result, an upsert
    of each that is."""
    if not pairs:
        return []
    connection = session.connection()
    present, result = sql.pair_statements(query, taxonomy, target, pairs, connection.dialect.name)
    ids: dict[tuple[str, str], list[str]] = {pair: [] for pair in pairs}
    for vessel, port, row_id in connection.execute(present):
        ids[(vessel, port)].append(row_id)
    kept: dict[tuple[str, str], list] = {pair: [] for pair in pairs}
    vessel_at, port_at = READ_COLUMNS.index("vessel_key"), READ_COLUMNS.index("port_unlocode")
    for row in connection.execute(result):
        kept[(row[vessel_at], row[port_at])].append(tuple(row))
    groups = []
    for pair in pairs:
        upserts = {row[0] for row in kept[pair]}
        groups.append([
            *(("delete", row_id) for row_id in sorted(ids[pair]) if row_id not in upserts),
            *(("upsert", row) for row in kept[pair]),
        ])
    return groups
