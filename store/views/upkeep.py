"""Keeping merged views in the database: build and bring up to date (issue 15).

A view is one kept merge (`store.database.schema.MergedView`). An `all` view is the
`merge=all` rows of a set of feeds (a buyer's visible feeds, or one feed for
`source`). There is one `by_source` view: every feed's own rows (C2.6), kept once per
feed whoever reads them, since a feed's `by_source` rows are its own merge; a buyer's
`by_source` rows are those of their visible feeds (`store.views.sql.Target.sources`).
A view's `versions` are the feeds' `data_version`s its rows reflect. Whatever changes
records notes, in the same transaction, the (vessel key, port) pairs it touched
(`store.views.changelog.note_changes`, table `vessel_changes`); bringing a view up to
date then merges again only the records of those pairs and replaces their rows:

    merge(records) == rows of untouched pairs + merge(records of touched pairs)

because a merge group never crosses a merge key (C2.2: vessel key + port + commodity
key), and a pair holds whole merge keys; `latest` (C3) ranks rows within a pair too,
so the pair's `is_top` marks come out of the same merge (in the `by_source` view, each
feed's latest of the pair). In an `all` view the vessel key is resolved (issue 19
rule 1: a name-only record is the one IMO its name carries among the view's records),
so the touched pairs are widened to the names' other pairs and IMO keys
(`store.views.merges.Merges.widened`, with the `changelog.link`s a change notes) and
merged with the whole view's identities. A change too large to list (more than
`changelog.LISTED_PAIRS`), a log that does not reach back to the view's versions, or
more than `INCREMENTAL_SHARE` of the view's rows to redo: the view (in the `by_source`
view, the feed's rows) is merged afresh.

Who does the work: an ingest or a commodity mapping brings every view of its feeds
that is in use up to date in its own transaction (`refresh_feeds`), so that readers
see the old rows or the new ones, never a mix, and never a view behind the records;
a reader, a subscription change or a resumed buyer builds a view once across
processes (`store.views.builds`). The change log is `store.views.changelog`.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Iterable, Sequence

from store.frames import pd
from sqlalchemy import delete, exists, literal, select
from sqlalchemy.orm import aliased
from sqlalchemy.orm import Session

from store.database import db
from store.database.db import sqlite_page_cache, vacuum_after_commit
from store.fields import MERGE_MODES as MODES, stored_now
from store.merging.merge_plan import NAT, nanos
from store.merging.resolve import Identities
from store.database.schema import Feed, MergedRow, MergedView, Record
from store.views import changelog, changes
from store.views.merges import Merges, Pair
from store.views.stored import copy_rows, insert_rows, replace_pair_rows, table_rows

log = logging.getLogger("lineups.views")

#: Above this share of a view's rows to merge again, a fresh merge is the cheaper way.
INCREMENTAL_SHARE = 0.25


@dataclass(frozen=True)
class ViewKey:
    """Which view: the merge mode and the sorted ids of its feeds."""

    mode: str
    feeds: tuple[str, ...]

    def describe(self) -> str:
        return f"{self.mode} view of {len(self.feeds)} feeds" if self.feeds else f"{self.mode} view"

    @property
    def feed_set(self) -> str:
        return hashlib.sha256(",".join(self.feeds).encode()).hexdigest()

    @classmethod
    def of(cls, mode: str, feed_ids: Iterable[str]) -> "ViewKey":
        """The view that holds `mode`'s rows of `feed_ids`: for `by_source`, the one
        view of every feed (`BY_SOURCE`)."""
        if mode not in MODES:
            raise ValueError(f"merge mode must be one of {MODES}, not {mode!r}")
        return BY_SOURCE if mode == "by_source" else cls(mode, tuple(sorted(set(feed_ids))))


#: The one `by_source` view: every feed's own rows, whatever buyers read them.
BY_SOURCE = ViewKey("by_source", ())


def _current_versions(session: Session, feed_ids: Sequence[str]) -> dict[str, int]:
    return dict(session.execute(select(Feed.id, Feed.data_version).where(Feed.id.in_(list(feed_ids)))).all())


def wanted_versions(session: Session, mode: str, feed_ids: Sequence[str]) -> dict[str, int]:
    """The versions a view of `mode` and `feed_ids` is current at: those of its feeds,
    or, for the `by_source` view, of every feed."""
    if mode == "by_source":
        return dict(session.execute(select(Feed.id, Feed.data_version)).all())
    return _current_versions(session, feed_ids)


def bring_up_to_date(session: Session, view: MergedView, merges: Merges | None = None) -> str:
    """Make `view` reflect its feeds' current records, in `session`'s transaction;
    returns what was done ("current", "incremental", "derived": a new view started
    as a copy of a near one, or "full"). The caller's transaction
    holds the view (`_hold`, or the ingest's row lock); `merges` shares loads and merges
    between the views of one transaction. An incremental update keeps the caller's
    page cache (an ingest's, sized by its file); a view written whole, or started as
    a copy, takes SQLite's large one (`sqlite_page_cache`)."""
    # Versions read before the records: never ahead of them.
    current = wanted_versions(session, view.mode, view.feeds)
    if view.state == "ready" and view.versions == current:
        return "current"
    update = _update_by_source if view.mode == "by_source" else _update_all
    written = changes.Written()
    how = update(session, view, current, merges or Merges(session), written)
    if view.state == "ready":  # a new view has no change-feed readers yet
        changes.note(session, view, written)
    view.versions, view.state, view.built_at = current, "ready", stored_now()
    session.flush()
    return how


def _update_all(
    session: Session, view: MergedView, current: dict[str, int], merges: Merges, written: changes.Written
) -> str:
    start = None
    if view.state == "ready":
        touched, rows = changelog.touched(session, view, current), view.row_count
    else:  # a new view: from a near one's rows when there is one
        start, touched = _nearest(session, view)
        rows = start.row_count if start is not None else 0
    loaded, identities = None, None
    if touched:  # issue 19 rule 5: names move between keys
        touched, loaded, identities = merges.widened(view, touched)
    if touched is not None and len(touched) <= INCREMENTAL_SHARE * max(rows, 1):
        if start is None:
            _merge_pairs(session, view, touched, merges, written, loaded, identities)
            return "incremental"
        with sqlite_page_cache(session):
            _copy(session, view, start)
            _merge_pairs(session, view, touched, merges, written, loaded, identities)
        return "derived"
    listed = view.state == "ready" and view.row_count <= changes.LISTED_ROWS
    before = changes.keys(session, view.id) if listed else set()
    with sqlite_page_cache(session):
        removed = session.execute(delete(MergedRow).where(MergedRow.view_id == view.id)).rowcount
        _write(session, view, merges.rows(view))
        _analyze(session, view.row_count)
    if listed:
        written.add_whole(before, changes.keys(session, view.id))
    else:
        written.whole.add(changes.EVERY_FEED)
    merges.written += removed + view.row_count
    return "full"


def _update_by_source(
    session: Session, view: MergedView, current: dict[str, int], merges: Merges, written: changes.Written
) -> str:
    """Bring the `by_source` view to `current` (every feed's version) a feed at a
    time: a feed's rows are its own merge (C2.6), so a change of one feed touches
    only its rows, and a feed the view does not hold yet (new to the store, or the
    view new) is merged and added alone. A feed's change that is not listed replaces
    the feed's rows; a listed one (at most `changelog.LISTED_PAIRS` pairs) merges its pairs
    again: with no rows of other feeds to merge or widen by, that is never much
    more work than the feed's whole merge, and it spares the scan of the view that
    deleting a feed's rows takes."""
    fresh = view.state != "ready"
    view.feeds = sorted(current)
    how = "incremental"
    for feed_id in view.feeds:
        since = view.versions.get(feed_id)
        if since == current[feed_id]:
            continue
        touched = changelog.feed_touched(session, feed_id, since, current[feed_id])
        if touched is not None:
            touched = {(vessel, port) for vessel, port in touched if port is not None}
            _merge_pairs(session, view, touched, merges, written, sources=frozenset({feed_id}))
            continue
        how = "full"
        removed = 0
        # Rows readers may hold (the feed was in the view): listed when few, else
        # their cursors expire.
        listed = since is not None and not fresh and view.row_count <= changes.LISTED_ROWS
        before = changes.keys(session, view.id, feed_id) if listed else set()
        with sqlite_page_cache(session):
            if since is not None:
                removed = session.execute(
                    delete(MergedRow).where(MergedRow.view_id == view.id, MergedRow.source_id == feed_id)
                ).rowcount
            rows = merges.rows(view, sources=frozenset({feed_id}))
            inserted = _insert(session, view, rows)
            view.row_count += inserted - removed
            merges.written += removed + inserted
        if listed:
            written.add_whole(before, changes.keys(session, view.id, feed_id), feed_id)
        elif since is not None and not fresh:
            written.whole.add(feed_id)
        view.max_span = max(view.max_span, _max_span(rows))
    if fresh:
        _analyze(session, view.row_count)
    return how


def _nearest(session: Session, view: MergedView) -> tuple[MergedView | None, set[Pair] | None]:
    """For a new `all` view: the nearest ready one (the fewest feeds added or
    removed, then the most rows), current for all its feeds (so that the removed
    feeds' pairs are those its rows hold), and the change that turns its rows into
    the new view's, as if the feeds it lacks had just received all their records and
    the feeds it should not hold had lost them (`_feed_entries`); `(None, None)` when
    no current view shares a feed.

    A buyer who gains or loses a feed makes a new feed set: its views then start as a
    copy of the nearest one's rows in the database (`_copy`) and merge again only the
    changed feeds' pairs, like an ingest's, instead of loading and merging every
    record of every feed (issue 15), when that change is small enough (`_update`)."""
    wanted = set(view.feeds)
    now = dict(session.execute(select(Feed.id, Feed.data_version)).all())
    nearest, best = None, None
    for other in session.scalars(
        select(MergedView)
        .where(MergedView.mode == "all", MergedView.state == "ready", MergedView.id != view.id)
        .order_by(MergedView.id)  # ties go to the oldest view, on every back end alike
    ):
        if not wanted & set(other.feeds) or other.versions != {f: now.get(f) for f in other.feeds}:
            continue
        rank = (len(wanted ^ set(other.feeds)), -other.row_count)
        if best is None or rank < best:
            nearest, best = other, rank
    if nearest is None:
        return None, None
    changed = sorted(wanted ^ set(nearest.feeds))
    return nearest, _feed_entries(session, changed, sorted(wanted & set(nearest.feeds)))


def _copy(session: Session, view: MergedView, start: MergedView) -> None:
    """Start `view` as a copy of the rows of `start`, in the database."""
    session.execute(delete(MergedRow).where(MergedRow.view_id == view.id))
    view.row_count = copy_rows(session.connection(), start.id, view.id)
    view.max_span = start.max_span  # a bound: a removed feed's longer spans only widen a `from` range
    log.info("View %d (%s) starts as a copy of view %d: %+d feeds, %d removed", view.id, view.mode, start.id,
             len(set(view.feeds) - set(start.feeds)), len(set(start.feeds) - set(view.feeds)))


def _feed_entries(session: Session, feed_ids: Sequence[str], kept: Sequence[str]) -> set[Pair]:
    """The change-log entries of all the records of `feed_ids`, as if each had just
    been ingested (`note_changes`), and, for an `all` view that keeps the feeds
    `kept`, the links (`link`) those records make or break: a link that a served
    record of a kept feed carries too stays (rule 1 resolves a name by the set of
    IMO numbers it carries), so it is left out."""
    if not feed_ids:
        return set()
    pairs = session.execute(
        select(Record.vessel_key, Record.port_unlocode).where(Record.feed_id.in_(feed_ids)).distinct()
    )
    touched = {(vessel or "", port) for vessel, port in pairs}
    served_imo = lambda r: (r.commodity.is_not(None), r.name_key.is_not(None), r.vessel_key.startswith("IMO"))  # noqa: E731
    other = aliased(Record)
    carried = select(literal(1)).where(
        other.feed_id.in_(kept), other.vessel_key == Record.vessel_key, other.name_key == Record.name_key, *served_imo(other)
    )
    links = session.execute(
        select(Record.vessel_key, Record.name_key)
        .where(Record.feed_id.in_(feed_ids), *served_imo(Record), ~exists(carried))
        .distinct()
    )
    return touched | {changelog.link(imo, name) for imo, name in links}


def _analyze(session: Session, written: int) -> None:
    """Fresh planner statistics of `merged_rows` after a view of `written` rows was
    written whole, by the rule of every large write (`db.analyze_if_stale`: none yet,
    or `written` at least a tenth of the rows they count; a small view's rows barely
    move them, and the analysis reads the whole table on SQLite, a sample of it on
    PostgreSQL, never waiting long for another transaction's analysis).
    Without them both planners probe `latest`'s (vessel, port) pairs through the
    primary key, a scan of the view per row (63 s instead of 0.1 s for one page of
    100,000 records). On SQLite every row is read (1.8 s for 1.6M rows): a sample
    (`analysis_limit`) reads the first rows of each index, all of one view and one
    port, and told the planner that a port or commodity selects nothing, so that
    filtered reads walked the whole date range instead (60 random questions at 1M
    records: pages p90 126 → 51 ms, the explorer's totals median 503 → 350 ms)."""
    db.analyze_if_stale(session, "merged_rows", written)


def _merge_pairs(
    session: Session,
    view: MergedView,
    touched: set[Pair],
    merges: Merges,
    written: changes.Written,
    loaded: frozenset[Pair] | None = None,
    identities: Identities | None = None,
    sources: frozenset[str] | None = None,
) -> None:
    """Merge again the records of the `touched` (vessel key, port) pairs and replace
    their rows, noting what changed in `written`; `loaded`, when given, are the pairs
    whose records make those rows (issue 19: name-only records resolved to an IMO),
    `identities` the view's; `sources`, in the `by_source` view, the feed whose rows
    these are."""
    if not touched:
        return
    rows = merges.rows(view, loaded if loaded is not None else frozenset(touched), identities, sources)
    rewrite = replace_pair_rows(session.connection(), view.id, sorted(touched), rows, sources)
    written.add(rewrite, next(iter(sources)) if sources else changes.EVERY_FEED)
    view.row_count += rewrite.written - rewrite.removed
    merges.written += rewrite.removed + rewrite.written
    view.max_span = max(view.max_span, _max_span(rows))


def _write(session: Session, view: MergedView, rows: pd.DataFrame) -> None:
    """Write the whole of `view` (its old rows already deleted)."""
    view.row_count = _insert(session, view, rows)
    view.max_span = _max_span(rows)


def _insert(session: Session, view: MergedView, rows: pd.DataFrame) -> int:
    """Insert merged `rows` into `view` (none of them there yet); returns how many."""
    columns, values = table_rows(view.id, rows, by_feed=view.mode == "by_source")
    return insert_rows(session.connection(), columns, values)


def _max_span(rows: pd.DataFrame) -> int:
    """The longest schedule span (ns) among merged `rows` with both ends dated."""
    if not len(rows):
        return 0
    start, end = nanos(rows["combined_date"]), nanos(rows["_span_end"])
    dated = (start != NAT) & (end != NAT)
    return int((end[dated] - start[dated]).max()) if dated.any() else 0


def refresh_feeds(session: Session, feed_ids: Sequence[str]) -> dict[str, int]:
    """Bring every built view in use that contains one of `feed_ids` up to date, in
    the caller's transaction (an ingest's or a commodity mapping's, after its records
    are written and its changes noted). Views are locked in id order, so that
    concurrent ingests never deadlock. Returns how many views were refreshed each way.

    A view that `builds.prune` marked unused (no buyer can read it; kept for
    `builds.RETENTION` in case one comes back to it) is left behind: the change log
    keeps what it has not seen (`changelog.prune_log`), and whoever reads it again
    brings it up to date first (`builds.ensure`, as the builder of a subscription
    change to its feed set does before the switch). A buyer who changed their
    subscription would otherwise have every ingest of the day keep their old feed
    set's rows as well (a daily update at 1,000,000 records kept six views instead of
    five, 3.3-3.5 s against 2.4 s).

    On PostgreSQL, once the transaction has committed, `merged_rows` is vacuumed when
    the rows its views deleted and wrote, with those of earlier writes not vacuumed
    yet, reach a tenth of the table (`db.vacuum_after_commit`, as ingest does for the
    records): a large ingest merges its feed's views afresh and leaves their old rows
    dead, which the next updates' reads and writes wade through until a vacuum
    reclaims them. At 1,000,000 records, after a 100,000-record ingest (1.4 million
    dead rows of 3.1 million; autovacuum had not come), daily updates took 2.13-2.15 s
    against 1.71-1.72 s before it, and 1.45-1.47 s after a `VACUUM merged_rows` of
    5.9 s (2026-11-29). The vacuum runs after the commit: readers see the change at
    once; only the command waits for it."""
    wanted = set(feed_ids)
    done = {"incremental": 0, "full": 0, "current": 0}
    views = [
        (view_id, mode, feeds)
        for view_id, mode, feeds in session.execute(
            select(MergedView.id, MergedView.mode, MergedView.feeds)
            .where(MergedView.state == "ready", MergedView.unused_since.is_(None))
            .order_by(MergedView.id)
        )
        if mode == "by_source" or wanted & set(feeds)  # the by_source view holds every feed, or soon will
    ]
    ids = [view_id for view_id, _, _ in views]
    merges = Merges(session, wanted | {f for _, mode, feeds in views if mode == "all" for f in feeds})
    for view_id in ids:
        view = session.get(MergedView, view_id, with_for_update=True, populate_existing=True)
        if view is not None:
            done[bring_up_to_date(session, view, merges)] += 1
    changelog.prune_log(session, wanted)
    vacuum_after_commit(session, "merged_rows", merges.written)
    return done
