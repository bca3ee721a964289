"""Lineup queries for a buyer: entitlement, the merge cache and the query pipeline.

The API, the share links and the explorer all ask this module, never each other.
The pipeline is C3's: merge (C2) → row filters → latest → sort → page (C4).

Caching: a feed's records are loaded once per `data_version` of the feed; the merged
result is kept per (visible feeds with their versions, merge mode); the sorted,
filtered rows per (merged result, query filters). Every request reads the buyer's
entitlements and the feeds' versions from the store in one query, so an ingest by
another process (which bumps the version) or a subscription change is seen by the
very next request, in every server process.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Hashable

import pandas as pd
from sqlalchemy.orm import Session

from store import accounts, merge, query as pipeline
from store.errors import Forbidden, NotFound
from store.explain import explain as explain_row
from store.feeds import is_uuid
from store.query import LineupQuery
from store.records import load_records
from store.schema import Feed


@dataclass(frozen=True)
class Selection:
    """The sorted rows of one query, ready to page (C3 order)."""

    key: Hashable
    rows: pd.DataFrame
    feeds: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.rows)


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


class LineupService:
    """Merged lineups with caches; one per server process, shared by its threads."""

    def __init__(self, merged_entries: int = 8, selection_entries: int = 64):
        self._lock = threading.RLock()
        self._records: dict[str, tuple[int, pd.DataFrame]] = {}
        self._merged = _LRU(merged_entries)
        self._selections = _LRU(selection_entries)

    # ------------------------------------------------------------ entitlement
    def feeds_for(self, session: Session, buyer_id: str, source: str | None) -> list[Feed]:
        """The feeds whose records the buyer may see for `source` (None: all).

        Raises NotFound for a UUID of no feed and Forbidden for a feed without an
        active or trial subscription (C5)."""
        entitled = [e.feed for e in accounts.entitlements(session, buyer_id)]
        if source is None:
            return entitled
        for feed in entitled:
            if feed.id == source:
                return [feed]
        if not is_uuid(source) or session.get(Feed, source) is None:
            raise NotFound(f"No feed with id {source}")
        raise Forbidden("You have no active or trial subscription to this feed")

    # ------------------------------------------------------------ data
    def records(self, session: Session, feeds: list[Feed]) -> pd.DataFrame:
        """The merge input of `feeds`, loaded once per feed and data version."""
        parts = []
        with self._lock:
            for feed in feeds:
                cached = self._records.get(feed.id)
                if cached is None or cached[0] != feed.data_version:
                    cached = (feed.data_version, load_records(session, [feed.id]))
                    self._records[feed.id] = cached
                parts.append(cached[1])
        if not parts:
            return load_records(session, [])
        return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]

    def merged(self, session: Session, feeds: list[Feed], mode: str) -> pd.DataFrame:
        """The merged rows of `feeds` under `mode` (C2), cached per feed versions."""
        key = (tuple(sorted((f.id, f.data_version) for f in feeds)), mode)
        with self._lock:
            cached = self._merged.get(key)
            if cached is None:
                cached = merge.merge(self.records(session, feeds), mode)
                self._merged.put(key, cached)
            return cached

    def select(self, session: Session, buyer_id: str, query: LineupQuery) -> Selection:
        """The buyer's rows for `query`, filtered, `latest` applied and sorted (C3)."""
        feeds = self.feeds_for(session, buyer_id, query.source)
        # JSON and CSV pages of one query share the sorted rows (C9: same rows).
        rows_key = dataclasses.replace(query, format="json").key()
        key = (tuple(sorted((f.id, f.data_version) for f in feeds)), rows_key)
        with self._lock:
            cached = self._selections.get(key)
            if cached is None:
                rows = pipeline.select(self.merged(session, feeds, query.merge), query)
                cached = Selection(key, rows, tuple(f.id for f in feeds))
                self._selections.put(key, cached)
            return cached

    def explain(self, session: Session, buyer_id: str, row_id: str, query: LineupQuery) -> dict[str, Any]:
        """Provenance of one merged row the buyer can see (same merge mode and
        source as `query`). Raises NotFound when no visible row has that id."""
        feeds = self.feeds_for(session, buyer_id, query.source)
        merged = self.merged(session, feeds, query.merge)
        hit = merged[merged["id"] == row_id]
        if hit.empty:
            raise NotFound(f"No lineup row with id {row_id}")
        # Groups never cross a merge key (C2.2), so the key's records suffice.
        row = hit.iloc[0]
        records = self.records(session, feeds)
        same_key = records[
            (records["vessel_key"] == row["vessel_key"])
            & (records["port_unlocode"] == row["port_unlocode"])
            & (records["commodity_key"] == row["commodity_key"])
        ]
        result = explain_row(row_id, same_key, query.merge)
        if result is None:  # pragma: no cover - the row was just found
            raise NotFound(f"No lineup row with id {row_id}")
        return result
