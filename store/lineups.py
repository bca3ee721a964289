"""Lineup queries for a buyer: entitlement, the merge cache and the query pipeline.

The API, the share links and the explorer all ask this module, never each other.
The pipeline is C3's: merge (C2) → row filters → latest → sort → page (C4).

Caching, per server process:
- a feed's records are kept with the feed's `data_version`; when the version moves,
  only the records written since (`store.records.load_changed`) are read and spliced
  in, and the merge keys they touch are noted;
- the merged result is kept per (visible feeds with their versions, merge mode). When
  the versions move, the newest result of the same feeds and mode is brought up to
  date by merging again only the touched keys (`store.remerge`); a full merge runs
  only when there is no such result, or too much changed;
- the sorted, filtered rows and their sort keys per (merged result, query filters).

Every request reads the buyer's entitlements and the feeds' versions from the store
in one small query, so an ingest by another process (which bumps the version) or a
subscription change is seen by the very next request, in every server process.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Sequence

import numpy as np
import pandas as pd
from sqlalchemy import select
from sqlalchemy.orm import Session

from store import accounts, columns, merge, query as pipeline, remerge
from store.accounts import FeedVersion
from store.errors import Forbidden, NotFound
from store.explain import explain as explain_row
from store.feeds import is_uuid
from store.query import LineupQuery, SortKeys
from store.records import load_changed, load_records
from store.schema import Feed

#: How many past record changes of a feed are remembered for bringing merged results
#: up to date; a result older than that is merged afresh.
CHANGE_LOG = 32
log = logging.getLogger("lineups.store")

Versions = tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Selection:
    """The sorted rows of one query, ready to page (C3 order), with their sort keys."""

    key: Hashable
    rows: pd.DataFrame
    feeds: tuple[str, ...]
    sort_keys: SortKeys

    def __len__(self) -> int:
        return len(self.rows)


@dataclass(frozen=True)
class _Change:
    """The merge keys (`remerge.key_hashes`) whose records changed from one version of
    a feed to the next."""

    start: int
    end: int
    keys: np.ndarray


@dataclass(frozen=True)
class _FeedRecords:
    """A feed's merge input at one data version with its records' key hashes, and its
    recent changes."""

    version: int
    frame: pd.DataFrame
    keys: np.ndarray
    changes: tuple[_Change, ...] = ()

    def keys_since(self, version: int) -> list[np.ndarray] | None:
        """The merge keys touched since `version`; None when that is not known."""
        keys, at = [], version
        for change in self.changes:
            if change.start == at:
                keys.append(change.keys)
                at = change.end
        return keys if at == self.version else None


@dataclass(frozen=True)
class _Merged:
    versions: Versions
    mode: str
    rows: pd.DataFrame
    keys: np.ndarray  #: `remerge.key_hashes` of the rows


class _LRU:
    def __init__(self, size: int):
        self.size = size
        self.items: OrderedDict = OrderedDict()

    def get(self, key):
        value = self.items.get(key)
        if value is not None:
            self.items.move_to_end(key)
        return value

    def put(self, key, value) -> None:
        self.items[key] = value
        self.items.move_to_end(key)
        while len(self.items) > self.size:
            self.items.popitem(last=False)

    def pop(self, key) -> None:
        self.items.pop(key, None)


def _versions(feeds: Sequence[FeedVersion]) -> Versions:
    return tuple(sorted((f.id, f.data_version) for f in feeds))


def _visible(entitled: Sequence[FeedVersion], source: str | None) -> list[FeedVersion] | None:
    """The entitled feeds that `source` selects; None when it names none of them."""
    if source is None:
        return list(entitled)
    chosen = [feed for feed in entitled if feed.id == source]
    return chosen or None


def _selection_key(feeds: Sequence[FeedVersion], query: LineupQuery) -> Hashable:
    # JSON and CSV pages of one query share the sorted rows (C9: same rows).
    return _versions(feeds), query.rows_key()


class LineupService:
    """Merged lineups with caches; one per server process, shared by its threads."""

    def __init__(self, merged_entries: int = 8, selection_entries: int = 64):
        self._lock = threading.RLock()
        self._records: dict[str, _FeedRecords] = {}
        self._merged = _LRU(merged_entries)
        self._selections = _LRU(selection_entries)

    # ------------------------------------------------------------ entitlement
    def feeds_for(
        self, session: Session, buyer_id: str, source: str | None, entitled: Sequence[FeedVersion] | None = None
    ) -> list[FeedVersion]:
        """The feeds (id, name, data version) whose records the buyer may see for
        `source` (None: all), ordered by name. `entitled` are the buyer's entitled
        feeds when the caller has just read them (`accounts.admit`); else they are read.

        Raises NotFound for a UUID of no feed and Forbidden for a feed without an
        active or trial subscription (C5)."""
        if entitled is None:
            entitled = accounts.entitled_feeds(session, buyer_id)
        else:  # on a replica: the versions of the records read there (one snapshot)
            entitled = accounts.feed_versions_in(session, entitled)
        visible = _visible(entitled, source)
        if visible is not None:
            return visible
        if not is_uuid(source) or session.scalar(select(Feed.id).where(Feed.id == source)) is None:
            raise NotFound(f"No feed with id {source}")
        raise Forbidden("You have no active or trial subscription to this feed")

    # ------------------------------------------------------------ data
    def records(self, session: Session, feeds: Sequence[FeedVersion]) -> pd.DataFrame:
        """The merge input of `feeds` (C2.1), from the per-feed cache."""
        parts = self._parts(session, feeds)
        if not parts:
            return load_records(session, [])
        return columns.concat(parts)

    def merged(self, session: Session, feeds: Sequence[FeedVersion], mode: str) -> pd.DataFrame:
        """The merged rows of `feeds` under `mode` (C2), cached per feed versions and
        brought up to date incrementally after an ingest."""
        versions = _versions(feeds)
        with self._lock:
            cached = self._merged.get((versions, mode))
            if cached is None:
                parts = self._feed_parts(session, feeds)
                cached = self._updated(versions, mode, parts)
                if cached is None:
                    frames = [part.frame for part in parts]
                    rows = merge.merge(columns.concat(frames) if frames else load_records(session, []), mode)
                    cached = _Merged(versions, mode, rows, remerge.key_hashes(rows))
                self._merged.put((versions, mode), cached)
            return cached.rows

    def select(
        self, session: Session, buyer_id: str, query: LineupQuery, entitled: Sequence[FeedVersion] | None = None
    ) -> Selection:
        """The buyer's rows for `query`, filtered, `latest` applied and sorted (C3).
        `entitled`: as for `feeds_for`."""
        feeds = self.feeds_for(session, buyer_id, query.source, entitled)
        key = _selection_key(feeds, query)
        with self._lock:
            cached = self._selections.get(key)
            if cached is None:
                rows = pipeline.select(self.merged(session, feeds, query.merge), query)
                cached = Selection(key, rows, tuple(f.id for f in feeds), pipeline.sort_keys(rows))
                self._selections.put(key, cached)
            return cached

    def cached(self, entitled: Sequence[FeedVersion], query: LineupQuery) -> Selection | None:
        """The selection `select` would return for a buyer with these `entitled` feeds,
        when it is cached; None when `select` must do the work (or decide between 404
        and 403 for `source`). Never touches the store, never blocks for long: the API
        answers warm pages with it on the event loop."""
        feeds = _visible(entitled, query.source)
        if feeds is None or not self._lock.acquire(blocking=False):  # a merge is running
            return None
        try:
            return self._selections.get(_selection_key(feeds, query))
        finally:
            self._lock.release()

    def explain(
        self,
        session: Session,
        buyer_id: str,
        row_id: str,
        query: LineupQuery,
        entitled: Sequence[FeedVersion] | None = None,
    ) -> dict[str, Any]:
        """Provenance of one merged row the buyer can see (same merge mode and
        source as `query`; `entitled` as for `feeds_for`). Raises NotFound when no
        visible row has that id."""
        feeds = self.feeds_for(session, buyer_id, query.source, entitled)
        merged = self.merged(session, feeds, query.merge)
        hit = merged[merged["id"] == row_id]
        if hit.empty:
            raise NotFound(f"No lineup row with id {row_id}")
        # Groups never cross a merge key (C2.2), so the key's records suffice.
        key = remerge.key_hashes(hit.iloc[:1])[0]
        same_key = [part.frame[part.keys == key] for part in self._feed_parts(session, feeds)]
        records = columns.concat(same_key) if same_key else load_records(session, [])
        result = explain_row(row_id, records, query.merge)
        if result is None:  # pragma: no cover - the row was just found
            raise NotFound(f"No lineup row with id {row_id}")
        return result

    def warm(self, session: Session, buyer_ids: Sequence[str], stopping: Callable[[], bool] = lambda: False) -> int:
        """Make, ahead of their first request, the default view of each of
        `buyer_ids` (all their feeds, merged, C3 order: the first /v1/lineups page and
        the explorer's first view), loading each feed once for all of them. Stops
        when the merge cache is full, so that warming never evicts what it made, and
        before the next buyer once `stopping()` is true (a server shutting down).
        Returns how many distinct sets of feeds were merged."""
        merged: set = set()
        for buyer_id in buyer_ids:
            if stopping():
                break
            feeds = accounts.entitled_feeds(session, buyer_id)
            if not feeds:
                continue
            versions = _versions(feeds)
            if versions not in merged and len(merged) >= self._merged.size:
                break
            merged.add(versions)
            self.select(session, buyer_id, LineupQuery(), feeds)
        return len(merged)

    # ------------------------------------------------------------ caches
    def _parts(self, session: Session, feeds: Sequence[FeedVersion]) -> list[pd.DataFrame]:
        return [part.frame for part in self._feed_parts(session, feeds)]

    def _feed_parts(self, session: Session, feeds: Sequence[FeedVersion]) -> list[_FeedRecords]:
        with self._lock:
            return [self._feed_records(session, feed) for feed in sorted(feeds, key=lambda f: f.id)]

    def _feed_records(self, session: Session, feed: FeedVersion) -> _FeedRecords:
        """The feed's records at `feed.data_version`: cached, spliced with what changed
        since the cached version, or loaded whole."""
        cached = self._records.get(feed.id)
        if cached is not None and cached.version == feed.data_version:
            return cached
        if cached is not None and cached.version < feed.data_version:
            changed = load_changed(session, feed.id, cached.version)
            frame, keys, touched = remerge.splice(cached.frame, cached.keys, changed)
            change = _Change(cached.version, feed.data_version, touched)
            cached = _FeedRecords(feed.data_version, frame, keys, (*cached.changes, change)[-CHANGE_LOG:])
        else:
            frame = load_records(session, [feed.id])
            cached = _FeedRecords(feed.data_version, frame, remerge.key_hashes(frame))
        self._records[feed.id] = cached
        return cached

    def _updated(self, versions: Versions, mode: str, parts: list[_FeedRecords]) -> _Merged | None:
        """The merged rows at `versions`, made from the newest cached result of the same
        feeds and mode by merging again the keys that changed since; None when there is
        no such result or a full merge is the better way. The older result and its
        selections leave the caches: nobody asks for old versions again."""
        feed_ids = [feed_id for feed_id, _ in versions]
        base = next(
            (m for m in reversed(self._merged.items.values()) if m.mode == mode and [f for f, _ in m.versions] == feed_ids),
            None,
        )
        if base is None:
            return None
        keys = []
        for feed_id, start in base.versions:
            since = self._records[feed_id].keys_since(start)
            if since is None:
                return None
            keys += since
        touched = np.concatenate(keys) if keys else np.empty(0, dtype=np.uint64)
        updated = remerge.remerge(base.rows, base.keys, [(p.frame, p.keys) for p in parts], touched, mode)
        if updated is None:
            return None
        self._forget(base)
        return _Merged(versions, mode, *updated)

    def _forget(self, old: _Merged) -> None:
        self._merged.pop((old.versions, old.mode))
        for key in [k for k in self._selections.items if k[0] == old.versions]:
            self._selections.pop(key)


def warm_up(
    service: LineupService, read: Callable[..., Any], buyers: int, stopping: Callable[[], bool] = lambda: False
) -> None:
    """`service.warm` for the `buyers` most recently active buyers (0: nothing), run
    as `read(work)` (a transaction of the caller's: the primary or a read replica).
    For a server that has just started: its first requests then find their rows
    merged instead of loading the store. Logs what it did; a failure is logged and
    changes nothing (requests load what they need, as without warming). A server
    that stops meanwhile sets `stopping`: warming ends after the buyer in hand."""
    if buyers <= 0:
        return
    started = time.perf_counter()
    try:
        def work(session: Session) -> tuple[int, int]:
            chosen = accounts.recently_active_buyers(session, buyers)
            return len(chosen), service.warm(session, chosen, stopping)

        chosen, views = read(work)
    except Exception:  # noqa: BLE001 - warming is an optimisation; requests still work
        if stopping():  # the store was closed under it
            log.info("Warming the lineup caches stopped with the server")
        else:
            log.warning("Could not warm the lineup caches; the first requests will load the store", exc_info=True)
        return
    if stopping():
        log.info("Warming the lineup caches stopped with the server after %.1f s", time.perf_counter() - started)
        return
    log.info(
        "Lineup caches warmed in %.1f s: default views of %d buyer(s), %d set(s) of feeds",
        time.perf_counter() - started, chosen, views,
    )
