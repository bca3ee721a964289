"""Keeping merged views in the database: build, bring up to date, drop (issue 15).

A view is one kept merge (`store.database.schema.MergedView`). An `all` view is the
`merge=all` rows of a set of feeds (a buyer's visible feeds, or one feed for
`source`). There is one `by_source` view: every feed's own rows (C2.6), kept once per
feed whoever reads them, since a feed's `by_source` rows are its own merge; a buyer's
`by_source` rows are those of their visible feeds (`store.views.sql.Target.sources`).
A view's `versions` are the feeds' `data_version`s its rows reflect. Whatever changes
records notes, in the same transaction, the (vessel key, port) pairs it touched
(`note_changes`, table `vessel_changes`); bringing a view up to date then merges again
only the records of those pairs and replaces their rows:

    merge(records) == rows of untouched pairs + merge(records of touched pairs)

because a merge group never crosses a merge key (C2.2: vessel key + port + commodity
key), and a pair holds whole merge keys; `latest` (C3) ranks rows within a pair too,
so the pair's `is_top` marks come out of the same merge (in the `by_source` view, each
feed's latest of the pair). In an `all` view the vessel key is resolved (issue 19
rule 1: a name-only record is the one IMO its name carries among the view's records),
so the touched pairs are widened to the names' other pairs and IMO keys
(`store.views.merges.Merges.widened`, with the `link`s a change notes) and merged with
the whole view's identities. A change too large to list (more than `LISTED_PAIRS`), a
log that does not reach back to the view's versions, or more than `INCREMENTAL_SHARE`
of the view's rows to redo: the view (in the `by_source` view, the feed's rows) is
merged afresh.

Who does the work, single flight across processes:
- an ingest or a commodity mapping brings every view of its feeds that is in use up
  to date in its own transaction (`refresh_feeds`), so that readers see the old rows
  or the new ones, never a mix, and never a view behind the records (a view no buyer
  can read is brought up to date when it is read again, from the change log);
- a reader that finds its view missing or behind calls `ensure`: the first process
  to hold the view builds it in one transaction that holds it throughout (a lock:
  PostgreSQL's on the view's row, SQLite's write lock; `_hold`), and the others wait
  for it (a server's readers on its event loop, not in a thread: `ViewBusy`,
  `store.views.lineups.patiently`). A process that dies in the middle of a build
  holds nothing any longer: its transaction ends with its connection, and the next
  reader builds the view at once;
- a subscription change builds the views of the feed set the buyer will see before
  it commits (`ensure_feeds`, `feeds_after`), so that it takes effect with its views
  ready and the buyer's next page is read, not merged; a buyer resumed, likewise
  (`ensure_buyer`). Views no buyer can read any longer are dropped after `RETENTION`
  (`prune`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import logging
import sqlite3
import time
from dataclasses import dataclass
from typing import Iterable, Sequence

import pandas as pd
from sqlalchemy import delete, exc as sa_exc, exists, insert, literal, select, text, update
from sqlalchemy.orm import aliased
from sqlalchemy.orm import Session, sessionmaker

from store.access.accounts import ENTITLED
from store.database import db
from store.database.db import sqlite_busy_timeout, sqlite_page_cache, transaction, vacuum_after_commit
from store.fields import utcnow
from store.merging.merge_plan import NAT, nanos
from store.merging.resolve import Identities
from store.database.schema import Buyer, Feed, MergedRow, MergedView, Record, Subscription, VesselChange
from store.views.merges import Merges, Pair
from store.views.stored import copy_rows, insert_rows, replace_pair_rows, table_rows

log = logging.getLogger("lineups.views")

MODES = ("all", "by_source")
#: Pairs listed per change of a feed; a larger change is noted as "everything".
LISTED_PAIRS = 20_000
#: Above this share of a view's rows to merge again, a fresh merge is the cheaper way.
INCREMENTAL_SHARE = 0.25
#: Seconds a reader waits for another process's hold on a view at a time, between
#: looks at whether that process has brought the view up to date.
HOLD_WAIT_S = 1.0
#: How long a reader waits for another process's build before giving up.
WAIT_S = 300.0
#: Views no buyer can read are dropped this long after they became unused.
RETENTION = dt.timedelta(days=1)


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


class ViewBusy(TimeoutError):
    """Another transaction holds the view (a build, or an ingest bringing it up to
    date) for longer than the reader would wait: ask again later (`ensure`)."""

    def __init__(self, key: ViewKey):
        super().__init__(f"the {key.describe()} is still being built by another process")
        self.key = key


# ---------------------------------------------------------------- the change log
def note_changes(session: Session, feed_id: str, version: int, pairs: Iterable[tuple[str | None, str]]) -> None:
    """Note that the change making `feed_id`'s data `version` touched the records of
    the (vessel key, port) `pairs` (before and after the change). Every change that
    bumps a feed's `data_version` calls this in the same transaction."""
    touched = {(vessel or "", port) for vessel, port in pairs}
    if len(touched) > LISTED_PAIRS:  # "everything": views of the feed are merged afresh
        touched = {(None, None)}
    ordered = sorted(touched, key=lambda pair: (pair[0] or "", pair[1] or ""))
    rows = [{"feed_id": feed_id, "version": version, "vessel_key": v, "port_unlocode": p} for v, p in ordered]
    if not rows:  # the version moved but touched nothing: the log stays complete
        rows = [{"feed_id": feed_id, "version": version, "vessel_key": "", "port_unlocode": None}]
    session.execute(insert(VesselChange), rows)


def link(imo_key: str, name_key: str) -> tuple[str, None]:
    """The change-log entry "a record with IMO `imo_key` is named `name_key`" (issue 19
    rule 5), noted beside the pairs by a change of such a record, before and after:
    a `LINK:` vessel key without a port (it fits: names are at most 200 characters)."""
    return f"LINK:{imo_key}:{name_key.removeprefix('NAME:')}", None


def _touched(session: Session, view: MergedView, current: dict[str, int]) -> set[Pair] | None:
    """The (vessel key, port) pairs changed in the view's feeds since its versions;
    None when that is not known (a feed new to the view, a change too large to list,
    a log that does not reach back), so that the view must be merged afresh."""
    touched: set[Pair] = set()
    for feed_id in view.feeds:
        changed = _feed_touched(session, feed_id, view.versions.get(feed_id), current.get(feed_id))
        if changed is None:
            return None
        touched |= changed
    return touched


def _feed_touched(session: Session, feed_id: str, since: int | None, now: int | None) -> set[Pair] | None:
    """The pairs (and links) the changes of `feed_id` after version `since` up to
    `now` touched; None when that is not known."""
    if since is None or now is None:
        return None
    if since == now:
        return set()
    rows = session.execute(
        select(VesselChange.version, VesselChange.vessel_key, VesselChange.port_unlocode).where(
            VesselChange.feed_id == feed_id, VesselChange.version > since, VesselChange.version <= now
        )
    ).all()
    if {version for version, _, _ in rows} != set(range(since + 1, now + 1)):
        return None
    touched: set[Pair] = set()
    for _, vessel, port in rows:
        if vessel is None:
            return None
        if port is not None or vessel.startswith("LINK:"):
            touched.add((vessel, port))
    return touched


def _prune_log(session: Session, feed_ids: Iterable[str]) -> None:
    """Forget changes that every view of the feed already reflects."""
    views = session.execute(select(MergedView.feeds, MergedView.versions)).all()
    for feed_id in feed_ids:
        seen = [versions.get(feed_id, 0) for feeds, versions in views if feed_id in feeds]
        floor = min(seen) if seen else None
        clause = VesselChange.feed_id == feed_id
        if floor is not None:
            clause = clause & (VesselChange.version <= floor)
        session.execute(delete(VesselChange).where(clause))


# ---------------------------------------------------------------- doing the work
def _current_versions(session: Session, feed_ids: Sequence[str]) -> dict[str, int]:
    return dict(session.execute(select(Feed.id, Feed.data_version).where(Feed.id.in_(list(feed_ids)))).all())


def _wanted_versions(session: Session, mode: str, feed_ids: Sequence[str]) -> dict[str, int]:
    """The versions a view of `mode` and `feed_ids` is current at: those of its feeds,
    or, for the `by_source` view, of every feed."""
    if mode == "by_source":
        return dict(session.execute(select(Feed.id, Feed.data_version)).all())
    return _current_versions(session, feed_ids)


def _bring_up_to_date(session: Session, view: MergedView, merges: Merges | None = None) -> str:
    """Make `view` reflect its feeds' current records, in `session`'s transaction;
    returns what was done ("current", "incremental", "derived": a new view started
    as a copy of a near one, or "full"). The caller's transaction
    holds the view (`_hold`, or the ingest's row lock); `merges` shares loads and merges
    between the views of one transaction. An incremental update keeps the caller's
    page cache (an ingest's, sized by its file); a view written whole, or started as
    a copy, takes SQLite's large one (`sqlite_page_cache`)."""
    # Versions read before the records: never ahead of them.
    current = _wanted_versions(session, view.mode, view.feeds)
    if view.state == "ready" and view.versions == current:
        return "current"
    update = _update_by_source if view.mode == "by_source" else _update_all
    how = update(session, view, current, merges or Merges(session))
    view.versions, view.state, view.built_at = current, "ready", _now()
    session.flush()
    return how


def _update_all(session: Session, view: MergedView, current: dict[str, int], merges: Merges) -> str:
    start = None
    if view.state == "ready":
        touched, rows = _touched(session, view, current), view.row_count
    else:  # a new view: from a near one's rows when there is one
        start, touched = _nearest(session, view)
        rows = start.row_count if start is not None else 0
    loaded, identities = None, None
    if touched:  # issue 19 rule 5: names move between keys
        touched, loaded, identities = merges.widened(view, touched)
    if touched is not None and len(touched) <= INCREMENTAL_SHARE * max(rows, 1):
        if start is None:
            _merge_pairs(session, view, touched, merges, loaded, identities)
            return "incremental"
        with sqlite_page_cache(session):
            _copy(session, view, start)
            _merge_pairs(session, view, touched, merges, loaded, identities)
        return "derived"
    with sqlite_page_cache(session):
        removed = session.execute(delete(MergedRow).where(MergedRow.view_id == view.id)).rowcount
        _write(session, view, merges.rows(view))
        _analyze(session, view.row_count)
    merges.written += removed + view.row_count
    return "full"


def _update_by_source(session: Session, view: MergedView, current: dict[str, int], merges: Merges) -> str:
    """Bring the `by_source` view to `current` (every feed's version) a feed at a
    time: a feed's rows are its own merge (C2.6), so a change of one feed touches
    only its rows, and a feed the view does not hold yet (new to the store, or the
    view new) is merged and added alone. A feed's change that is not listed replaces
    the feed's rows; a listed one (at most `LISTED_PAIRS` pairs) merges its pairs
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
        touched = _feed_touched(session, feed_id, since, current[feed_id])
        if touched is not None:
            touched = {(vessel, port) for vessel, port in touched if port is not None}
            _merge_pairs(session, view, touched, merges, sources=frozenset({feed_id}))
            continue
        how = "full"
        removed = 0
        with sqlite_page_cache(session):
            if since is not None:
                removed = session.execute(
                    delete(MergedRow).where(MergedRow.view_id == view.id, MergedRow.source_id == feed_id)
                ).rowcount
            rows = merges.rows(view, sources=frozenset({feed_id}))
            inserted = _insert(session, view, rows)
            view.row_count += inserted - removed
            merges.written += removed + inserted
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
    return touched | {link(imo, name) for imo, name in links}


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
    loaded: frozenset[Pair] | None = None,
    identities: Identities | None = None,
    sources: frozenset[str] | None = None,
) -> None:
    """Merge again the records of the `touched` (vessel key, port) pairs and replace
    their rows; `loaded`, when given, are the pairs whose records make those rows
    (issue 19: name-only records resolved to an IMO), `identities` the view's;
    `sources`, in the `by_source` view, the feed whose rows these are."""
    if not touched:
        return
    rows = merges.rows(view, loaded if loaded is not None else frozenset(touched), identities, sources)
    removed, written = replace_pair_rows(session.connection(), view.id, sorted(touched), rows, sources)
    view.row_count += written - removed
    merges.written += removed + written
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


def _now() -> dt.datetime:
    return utcnow().replace(tzinfo=None)


# ---------------------------------------------------------------- entry points
def refresh_feeds(session: Session, feed_ids: Sequence[str]) -> dict[str, int]:
    """Bring every built view in use that contains one of `feed_ids` up to date, in
    the caller's transaction (an ingest's or a commodity mapping's, after its records
    are written and its changes noted). Views are locked in id order, so that
    concurrent ingests never deadlock. Returns how many views were refreshed each way.

    A view that `prune` marked unused (no buyer can read it; kept for `RETENTION` in
    case one comes back to it) is left behind: the change log keeps what it has not
    seen (`_prune_log`), and whoever reads it again brings it up to date first
    (`ensure`, as a subscription change to its feed set does before it commits). A
    buyer who changed their subscription would otherwise have every ingest of the
    day keep their old feed set's rows as well (a daily update at 1,000,000 records
    kept six views instead of five, 3.3-3.5 s against 2.4 s).

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
            done[_bring_up_to_date(session, view, merges)] += 1
    _prune_log(session, wanted)
    vacuum_after_commit(session, "merged_rows", merges.written)
    return done


def ensure(sessions: sessionmaker[Session], key: ViewKey, wait: float = WAIT_S) -> int:
    """The id of the view `key`, current: built or brought up to date by this call,
    or by another process while this one waits. Raises ViewBusy when another
    transaction holds the view for longer than `wait` seconds (with `wait=0`, at
    once: a server's reader then waits off its thread, `lineups.patiently`)."""
    deadline = time.monotonic() + wait
    while True:
        left = max(deadline - time.monotonic(), 0.0)
        view_id = _find_or_add(sessions, key, left)
        if view_id is not None and (_is_current(sessions, view_id) or _build(sessions, view_id, min(HOLD_WAIT_S, left))):
            return view_id
        if time.monotonic() >= deadline:
            raise ViewBusy(key)
        time.sleep(0.05)


def _find_or_add(sessions: sessionmaker[Session], key: ViewKey, wait: float) -> int | None:
    """The id of the view `key`; a missing one is added, empty (`building`), for
    whichever process holds it first to build. Adding a row waits for SQLite's write
    lock as any write does (its busy timeout, then an error), or at most `wait`
    seconds when that is shorter (a server's reader): None when it is still held."""
    find = select(MergedView.id).where(MergedView.mode == key.mode, MergedView.feed_set == key.feed_set)
    with transaction(sessions) as session:
        found = session.scalar(find)
        if found is not None:
            return found
    shorter = wait < db.SQLITE_BUSY_S
    try:
        with transaction(sessions) as session:
            with sqlite_busy_timeout(session, wait) if shorter else contextlib.nullcontext():
                view = MergedView(
                    mode=key.mode, feed_set=key.feed_set, feeds=list(key.feeds), versions={}, state="building",
                    max_span=0, row_count=0,
                )
                session.add(view)
                session.flush()
            return view.id
    except sa_exc.IntegrityError:  # another process added it in between
        with transaction(sessions) as session:
            return session.scalar(find)
    except sa_exc.OperationalError as error:
        if not (shorter and _sqlite_busy(error)):
            raise
        return None


def _build(sessions: sessionmaker[Session], view_id: int, wait: float) -> bool:
    """Bring the view up to date in one transaction that holds it (`_hold`); False,
    having done nothing, when another process held it for `wait` seconds."""
    started = time.perf_counter()
    with transaction(sessions) as session:
        if not _hold(session, view_id, wait):
            return False
        view = session.get(MergedView, view_id, populate_existing=True)
        if view is None:  # dropped meanwhile (`prune`): `ensure` adds it again
            return False
        new = view.state != "ready"
        with sqlite_page_cache(session):
            how = _bring_up_to_date(session, view)
        rows = view.row_count
    if new:
        _count_views(sessions)
    log.info("View %d (%s) brought up to date (%s): %d rows in %.2f s", view_id, view.mode, how, rows, time.perf_counter() - started)
    return True


def _count_views(sessions: sessionmaker[Session]) -> None:
    """On PostgreSQL, once a new view has committed, the planner's statistics of
    `merged_rows.view_id` taken again, so that they know it. Statistics that do not
    count a view's rows put it at one row, and a daily update's statements on it took
    plans for one row: its stored rows read through a hash of the whole view, each
    update of a row a walk of the view's index (1.0 s, and 0.15 s an update, in a
    1,000,000-record update that took 6.8 s; 4.2-4.9 s with its statistics). The view's
    own ANALYZE (`_analyze`) counts it only when it is a large share of the rows. A
    sample of 3,000 rows (statistics target 10, one column: 66 ms at 2,500,000 rows,
    against 0.7-1.9 s for the table's whole ANALYZE), after the commit: ANALYZE holds
    a lock on the table, one at a time, to the end of its transaction, which a build
    (holding its view) must not wait for (another transaction may hold the lock and
    wait for that view). Nor does the reader that built the view wait here: when
    another transaction holds that lock (an ingest that analysed the table after
    writing a large view, to its commit) the count is left to the next ANALYZE after
    `db.ANALYZE_LOCK_WAIT_MS`, and the view is served as it is."""
    with transaction(sessions) as session:
        if session.connection().dialect.name != "postgresql":
            return
        session.execute(text("SELECT set_config('default_statistics_target', '10', true)"))
        db.analyze_unless_busy(session, "merged_rows (view_id)")


def _hold(session: Session, view_id: int, wait: float) -> bool:
    """Take the view for the rest of `session`'s transaction (single flight across
    processes): PostgreSQL's lock of its row, SQLite's one write lock. A lock, not a
    mark in the row: the database drops it when the transaction ends, and so when the
    process holding it dies, and the next reader builds the view at once. False when
    another transaction held it for `wait` seconds (a build, or an ingest bringing
    the view up to date).

    On SQLite the first statement writes, so that the lock is taken before anything
    is read and no ingest commits in between; on PostgreSQL the row's lock is tried
    again every 50 ms (`ensure`) rather than waited for, as a statement waiting on it
    would meet the statement timeout during a long build."""
    in_use = update(MergedView).where(MergedView.id == view_id).values(unused_since=None)
    if session.get_bind().dialect.name != "sqlite":
        held = session.scalar(select(MergedView.id).where(MergedView.id == view_id).with_for_update(skip_locked=True))
        if held is None:
            return False
        session.execute(in_use)
        return True
    try:
        with sqlite_busy_timeout(session, wait):
            session.execute(in_use)
    except sa_exc.OperationalError as error:
        if not _sqlite_busy(error):
            raise
        return False
    return True


def _sqlite_busy(error: sa_exc.OperationalError) -> bool:
    """Whether `error` is SQLite's SQLITE_BUSY, or one of its extended codes (a
    recovery of the log under way): another connection holds the write lock."""
    return getattr(error.orig, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_BUSY


def _is_current(sessions: sessionmaker[Session], view_id: int) -> bool:
    with transaction(sessions) as session:
        view = session.get(MergedView, view_id)
        if view is None or view.state != "ready":
            return False
        return view.versions == _wanted_versions(session, view.mode, view.feeds)


def buyer_feeds(session: Session, buyer_id: str) -> set[str]:
    """The ids of the feeds the buyer is entitled to (active or trial)."""
    return set(
        session.scalars(
            select(Subscription.feed_id).where(Subscription.buyer_id == buyer_id, Subscription.status.in_(ENTITLED))
        )
    )


def feeds_after(session: Session, buyer_id: str, feed_id: str, status: str) -> set[str]:
    """The feeds the buyer will be entitled to once their subscription to `feed_id`
    is `status`."""
    feeds = buyer_feeds(session, buyer_id) - {feed_id}
    return feeds | {feed_id} if status in ENTITLED else feeds


def ensure_feeds(sessions: sessionmaker[Session], feed_ids: Iterable[str]) -> int:
    """Build (or bring up to date) the views that a buyer of exactly `feed_ids` reads
    over all their feeds, `all` first (the default page), then the `by_source` view
    (which holds every feed); returns how many views that is. Before a subscription
    change commits, so that the change takes effect with its views ready."""
    feed_ids = sorted(feed_ids)
    keys = [ViewKey.of(mode, feed_ids) for mode in MODES] if feed_ids else []
    for key in keys:
        ensure(sessions, key)
    return len(keys)


def ensure_buyer(sessions: sessionmaker[Session], buyer_id: str) -> int:
    """`ensure_feeds` of the buyer's entitled feeds: their next page is read, not
    merged."""
    with transaction(sessions) as session:
        feed_ids = buyer_feeds(session, buyer_id)
    return ensure_feeds(sessions, feed_ids)


def prune(session: Session, retention: dt.timedelta = RETENTION) -> int:
    """Mark views that no active buyer can read (no buyer sees exactly that set of
    feeds for an `all` view; none is entitled to the feed of a one-feed view; no
    buyer is entitled to any feed, for the `by_source` view) as unused, and drop
    those unused for longer than `retention`; returns how many were dropped. Views
    in use again lose their mark."""
    rows = session.execute(
        select(Subscription.buyer_id, Subscription.feed_id)
        .join(Buyer, Buyer.id == Subscription.buyer_id)
        .where(Subscription.status.in_(ENTITLED), Buyer.status == "active")
    ).all()
    sets: dict[str, set[str]] = {}
    for buyer_id, feed_id in rows:
        sets.setdefault(buyer_id, set()).add(feed_id)
    in_use = {ViewKey.of("all", feeds).feed_set for feeds in sets.values()}
    single = {feed_id for _, feed_id in rows}
    in_use |= {ViewKey.of("all", [feed_id]).feed_set for feed_id in single}
    if single:
        in_use.add(BY_SOURCE.feed_set)
    now, dropped = _now(), 0
    # A view that another transaction holds (a build: it is in use) is left alone.
    for view in session.scalars(select(MergedView).with_for_update(skip_locked=True)):
        used = view.feed_set in in_use
        if used:
            view.unused_since = None
        elif view.unused_since is None:
            view.unused_since = now
        elif now - view.unused_since >= retention:
            session.execute(delete(MergedRow).where(MergedRow.view_id == view.id))
            session.delete(view)
            dropped += 1
    session.flush()
    return dropped
