"""Who builds a kept view, once across processes, and when views go (issue 15, 47).

- A reader that finds its view missing or behind calls `ensure`: the first process
  to hold the view builds it (`store.views.upkeep.bring_up_to_date`) in one
  transaction that holds it throughout (a lock: PostgreSQL's on the view's row,
  SQLite's write lock; `_hold`), and the others wait for it (a server's readers on
  its event loop, not in a thread: `ViewBusy`, `store.views.lineups.patiently`). A
  process that dies in the middle of a build holds nothing any longer: its
  transaction ends with its connection, and the next reader builds the view at once.
- A subscription change is built for in the background (`store.views.builder`, which
  calls `ensure` for the buyer's wanted feeds, then switches them:
  `store.views.pending`); `ensure_buyer` brings the views of what a buyer reads now
  up to date (the demo data set, benchmarks).
- Views no buyer can read are dropped (`prune`): at once when no buyer ever read
  one, else after `RETENTION` (their reader may come back); an ingest leaves them
  behind (`store.views.upkeep.refresh_feeds`) and whoever reads one again brings it
  up to date first.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import sqlite3
import time
from typing import Iterable

from sqlalchemy import delete, exc as sa_exc, select, text, update
from sqlalchemy.orm import Session, sessionmaker

from store.access.accounts import ENTITLED
from store.database import db
from store.database.db import sqlite_busy_timeout, sqlite_page_cache, transaction
from store.database.schema import Buyer, MergedRow, MergedView, Subscription, ViewChange, ViewRead
from store.fields import stored_now
from store.views import pending, upkeep
from store.views.upkeep import BY_SOURCE, MODES, ViewKey

log = logging.getLogger("lineups.views")

#: Seconds a reader waits for another process's hold on a view at a time, between
#: looks at whether that process has brought the view up to date.
HOLD_WAIT_S = 1.0
#: How long a reader waits for another process's build before giving up.
WAIT_S = 300.0
#: Views no buyer can read, that buyers read before, are dropped this long after
#: they became unused (one never read goes at once).
RETENTION = dt.timedelta(days=1)


class ViewBusy(TimeoutError):
    """Another transaction holds the view (a build, or an ingest bringing it up to
    date) for longer than the reader would wait: ask again later (`ensure`)."""

    def __init__(self, key: ViewKey):
        super().__init__(f"the {key.describe()} is still being built by another process")
        self.key = key


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
            how = upkeep.bring_up_to_date(session, view)
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
        return view.versions == upkeep.wanted_versions(session, view.mode, view.feeds)


def buyer_feeds(session: Session, buyer_id: str) -> set[str]:
    """The ids of the feeds the buyer is entitled to (active or trial)."""
    return set(
        session.scalars(
            select(Subscription.feed_id).where(Subscription.buyer_id == buyer_id, Subscription.status.in_(ENTITLED))
        )
    )


def ensure_feeds(sessions: sessionmaker[Session], feed_ids: Iterable[str]) -> int:
    """Build (or bring up to date) the views that a buyer of exactly `feed_ids` reads
    over all their feeds, `all` first (the default page), then the `by_source` view
    (which holds every feed); returns how many views that is."""
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
    buyer is entitled to any feed, for the `by_source` view) and that no waiting
    buyer will read (`pending.wanted_feed_sets`) as unused; drop at once those no
    buyer ever read (`ViewRead`), and the others once unused for longer than
    `retention`. Returns how many were dropped. Views in use again lose their mark."""
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
    in_use |= pending.wanted_feed_sets(session)
    read = set(session.scalars(select(ViewRead.view_id)))
    now, dropped = stored_now(), 0
    # A view that another transaction holds (a build: it is in use) is left alone.
    for view in session.scalars(select(MergedView).with_for_update(skip_locked=True)):
        if view.feed_set in in_use:
            view.unused_since = None
            continue
        if view.unused_since is None:
            view.unused_since = now
        if view.id not in read or now - view.unused_since >= retention:
            session.execute(delete(MergedRow).where(MergedRow.view_id == view.id))
            session.execute(delete(ViewChange).where(ViewChange.view_id == view.id))
            session.execute(delete(ViewRead).where(ViewRead.view_id == view.id))
            session.delete(view)
            dropped += 1
    # Notes of reads of views dropped meanwhile (`usage.note_view_reads` raced a drop).
    session.execute(delete(ViewRead).where(ViewRead.view_id.not_in(select(MergedView.id))))
    session.flush()
    return dropped
