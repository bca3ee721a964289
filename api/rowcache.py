"""Rows serialised once per cached result, not once per request (issue 4, speed).

The lineup service caches each query's sorted rows (`store.lineups.Selection`); pages
are contiguous slices of them. `RowCache` keeps, per sorted frame, format and block
of `BLOCK` rows, each row's JSON object or CSV line as bytes, made by `api.render` the
first time a page needs the block. A page is then a join of cached bytes. The cache
holds at most `max_bytes`, least recently used blocks leave first; a block belongs to
its frame by identity (checked through a weak reference, so a new frame that reuses a
dead one's id never sees its rows).

A smaller memory serves the same end: the position of each page served (its row
range and next cursor, so a warm page skips the cursor work), and the finished body of
each page served more than once, within `max_body_bytes` (a page asked again, by a
client polling its first page or by many clients walking the same pages, is then sent
as it is: joining the ~100 KB body of a page from its rows was ~5% of a warm page's
time, most of it in fresh memory from the operating system). Whole-result exports
are not kept: `store.csvtext` writes them a block at a time, faster than a cache of
their text would fill and in constant memory.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict

import pandas as pd

from api import render

BLOCK = 500
DEFAULT_MAX_BYTES = 128 * 1024 * 1024
#: Page bodies kept (`RowCache.body`): a few hundred pages of 100 rows.
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
#: Page positions remembered (`RowCache.position`).
PAGE_POSITIONS = 4096


class RowCache:
    """Encoded rows of sorted results; thread-safe."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES):
        self.max_bytes = max_bytes
        self.max_body_bytes = max_body_bytes
        self._blocks: OrderedDict[tuple[int, str, int], tuple[weakref.ref, list[bytes], int]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        self._positions: OrderedDict[tuple, tuple[weakref.ref, object]] = OrderedDict()
        self._bodies: OrderedDict[tuple, tuple[weakref.ref, tuple[bytes, str | None]]] = OrderedDict()
        self._body_size = 0

    def position(self, result: pd.DataFrame, page: tuple) -> object | None:
        """What `remember` noted for the page `page` (a hashable description: query
        binding, cursor, limit) of `result`; None when nothing is noted. A warm page
        then skips reading and signing cursors and the keyset search."""
        return self._kept(self._positions, result, page)

    def remember(self, result: pd.DataFrame, page: tuple, value: object) -> None:
        """Note `value` (the page's row range and next cursor) for `position`."""
        with self._lock:
            self._positions[(id(result), page)] = (weakref.ref(result), value)
            if len(self._positions) > PAGE_POSITIONS:
                self._positions.popitem(last=False)

    def body(self, result: pd.DataFrame, page: tuple) -> tuple[bytes, str | None] | None:
        """The body and next cursor kept by `keep_body` for the page `page` (as for
        `position`) of `result`; None when none is kept."""
        return self._kept(self._bodies, result, page)

    def _kept(self, table: OrderedDict, result: pd.DataFrame, page: tuple):
        """What `table` (page positions or bodies) holds for `page` of `result`, made
        the most recently used; None when nothing, or only another frame's."""
        key = (id(result), page)
        with self._lock:
            hit = table.get(key)
            if hit is None or hit[0]() is not result:
                return None
            table.move_to_end(key)
            return hit[1]

    def keep_body(self, result: pd.DataFrame, page: tuple, body: bytes, cursor: str | None) -> None:
        """Keep a page's finished `body` and next `cursor` for `body`, the least
        recently used leaving first beyond `max_body_bytes`."""
        if len(body) > self.max_body_bytes:
            return
        key = (id(result), page)
        with self._lock:
            old = self._bodies.pop(key, None)
            if old is not None:
                self._body_size -= len(old[1][0])
            self._bodies[key] = (weakref.ref(result), (body, cursor))
            self._body_size += len(body)
            while self._body_size > self.max_body_bytes:
                _, (_, (dropped, _)) = self._bodies.popitem(last=False)
                self._body_size -= len(dropped)

    def page(self, result: pd.DataFrame, rows: pd.DataFrame, fmt: str) -> list[bytes]:
        """The encoded rows (`fmt` "json": objects; "csv": lines) of `rows`, a page that
        `store.query.page` cut from `result`. Falls back to encoding `rows` directly
        when the page is not a contiguous slice of a RangeIndex."""
        if rows.empty:
            return []
        if not (_numbered(result) and isinstance(rows.index, pd.RangeIndex) and rows.index.step == 1):
            return _encode(rows, fmt)
        start = int(rows.index[0])
        return self.rows(result, start, start + len(rows), fmt)

    def rows(self, result: pd.DataFrame, start: int, stop: int, fmt: str) -> list[bytes]:
        """The encoded rows `start` to `stop` (row numbers) of `result`."""
        if stop <= start:
            return []
        if not _numbered(result):
            return _encode(result.iloc[start:stop], fmt)
        first_block, last_block = start // BLOCK, (stop - 1) // BLOCK
        blocks = {b: self._cached(result, fmt, b) for b in range(first_block, last_block + 1)}
        missing = [b for b, encoded in blocks.items() if encoded is None]
        if missing:
            # Encoded in one go from the first missing block to the last: the encoder
            # has a cost per call (a long export would pay it once per block).
            low, high = missing[0], missing[-1]
            encoded = _encode(result.iloc[low * BLOCK: (high + 1) * BLOCK], fmt)
            for b in range(low, high + 1):
                blocks[b] = self._store(result, fmt, b, encoded[(b - low) * BLOCK: (b - low + 1) * BLOCK])
        out: list[bytes] = []
        for b in range(first_block, last_block + 1):
            first = b * BLOCK
            out += blocks[b][max(start - first, 0): stop - first]
        return out

    def _cached(self, result: pd.DataFrame, fmt: str, block: int) -> list[bytes] | None:
        key = (id(result), fmt, block)
        with self._lock:
            hit = self._blocks.get(key)
            if hit is not None and hit[0]() is result:
                self._blocks.move_to_end(key)
                return hit[1]
        return None

    def _store(self, result: pd.DataFrame, fmt: str, block: int, encoded: list[bytes]) -> list[bytes]:
        key = (id(result), fmt, block)
        size = sum(len(b) for b in encoded)
        with self._lock:
            old = self._blocks.pop(key, None)
            if old is not None:
                self._size -= old[2]
            self._blocks[key] = (weakref.ref(result), encoded, size)
            self._size += size
            while self._size > self.max_bytes and len(self._blocks) > 1:
                _, (_, _, dropped) = self._blocks.popitem(last=False)
                self._size -= dropped
        return encoded


def _numbered(result: pd.DataFrame) -> bool:
    """Whether row numbers of `result` are its index labels (0, 1, 2, …)."""
    index = result.index
    return isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1


def _encode(rows: pd.DataFrame, fmt: str) -> list[bytes]:
    return render.csv_lines(rows) if fmt == "csv" else render.json_objects(rows)
