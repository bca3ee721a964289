"""The encoded-row cache: pages from it are byte for byte what rendering gives."""

from __future__ import annotations

import pandas as pd

from api import render, rowcache
from api.rowcache import RowCache
from store.fields import RECORD_FIELDS


def result(n: int) -> pd.DataFrame:
    frame = pd.DataFrame({field: [None] * n for field in RECORD_FIELDS})
    frame["id"] = [f"row{i:05d}" for i in range(n)]
    frame["shipper"] = [f"=cmd{i}" if i % 7 == 0 else f"Shipper {i}" for i in range(n)]
    frame["eta"] = pd.to_datetime([f"2024-03-{1 + i % 28:02d}T06:00:00Z" for i in range(n)], utc=True)
    for field in ("etb", "etd", "combined_date", "created_at", "updated_at"):
        frame[field] = pd.to_datetime(frame[field], utc=True)
    frame["dwt"] = pd.array([i if i % 3 else None for i in range(n)], dtype="Int64")
    frame["quantity"] = [i * 1.5 for i in range(n)]
    return frame


def test_pages_equal_direct_rendering_across_blocks(monkeypatch):
    monkeypatch.setattr(rowcache, "BLOCK", 7)
    cache = RowCache()
    frame = result(40)
    for start, stop in ((0, 5), (5, 20), (13, 14), (20, 40), (0, 40)):
        page = frame.iloc[start:stop]
        assert render.json_body(cache.page(frame, page, "json"), None) == render.json_page(page, None)
        assert render.csv_body(cache.page(frame, page, "csv")) == render.csv_page(page)
    assert cache.page(frame, frame.iloc[0:0], "json") == []


def test_the_cache_stays_within_its_budget_and_knows_its_frames(monkeypatch):
    monkeypatch.setattr(rowcache, "BLOCK", 10)
    cache = RowCache(max_bytes=15_000)  # a block of 10 rows is about 6 kB
    frame = result(100)
    for start in range(0, 100, 10):
        cache.page(frame, frame.iloc[start:start + 10], "json")
    assert cache._size <= 15_000 and 1 <= len(cache._blocks) < 10
    # Another frame (even one equal in content) never gets this frame's rows.
    other = result(100)
    other["id"] = [f"other{i}" for i in range(100)]
    got = cache.page(other, other.iloc[90:100], "json")
    assert all(b"other" in row for row in got)


def test_a_non_range_index_is_rendered_directly():
    frame = result(5).set_index(pd.Index([10, 11, 12, 13, 14]))
    assert RowCache().page(frame, frame.iloc[1:3], "csv") == render.csv_lines(frame.iloc[1:3])


def test_page_bodies_are_kept_per_frame_within_their_budget():
    cache = RowCache(max_body_bytes=25)
    frame, equal = result(10), result(10)
    cache.keep_body(frame, ("query", None, 10), b"0123456789", "next")
    assert cache.body(frame, ("query", None, 10)) == (b"0123456789", "next")
    assert cache.body(frame, ("query", "next", 10)) is None  # another page
    assert cache.body(equal, ("query", None, 10)) is None  # another result, however equal
    cache.keep_body(frame, ("query", "a", 10), b"a" * 10, "b")
    assert cache.body(frame, ("query", None, 10)) is not None  # the first is now the newer one
    cache.keep_body(frame, ("query", "b", 10), b"b" * 10, "c")  # 30 bytes > 25: the oldest leaves
    assert cache.body(frame, ("query", "a", 10)) is None
    assert cache.body(frame, ("query", None, 10)) is not None and cache.body(frame, ("query", "b", 10)) is not None
    cache.keep_body(frame, ("query", "huge", 10), b"x" * 26, None)  # larger than the budget: not kept
    assert cache.body(frame, ("query", "huge", 10)) is None and cache._body_size == 20
