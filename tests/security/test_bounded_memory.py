"""No client can grow the API's memories without bound (issue 16 item 5): each
cache in api/ is bounded, by bytes where its entries vary in size (a client
chooses the length of its query strings)."""

from __future__ import annotations

from api import cursors
from api.ratelimit import MemoryLimiter


def test_cursor_bindings_are_bounded_by_bytes(monkeypatch):
    bindings = cursors._Bindings(max_bytes=64 * 1024)
    monkeypatch.setattr(cursors, "_BINDINGS", bindings)
    for n in range(2_000):  # distinct long queries, as a client may send them
        key = '{"port_name":"' + f"{n:05d}" * 600 + '"}'  # ~3 KB each: remembered
        assert cursors.binding(key, "json") == cursors.binding(key, "json")
    assert bindings.size <= 64 * 1024
    huge = '{"port_name":"' + "x" * 100_000 + '"}'
    before = bindings.size
    assert len(cursors.binding(huge, "csv")) == 24  # answered, never remembered
    assert bindings.size == before


def test_a_binding_is_the_same_remembered_or_not(monkeypatch):
    key = '{"port":"BRSSZ"}'
    fresh = cursors.binding(key, "json")
    monkeypatch.setattr(cursors, "_BINDINGS", cursors._Bindings(max_bytes=0))  # remembers nothing
    assert cursors.binding(key, "json") == fresh
    assert cursors.binding(key, "csv") != fresh


def test_the_rate_limiter_counts_a_bounded_number_of_clients(monkeypatch):
    monkeypatch.setattr(MemoryLimiter, "MAX_KEYS", 1_000)
    limiter = MemoryLimiter(limit=3, window=60, clock=lambda: 0.0)
    for _ in range(3):
        assert limiter.hit("key:busy").allowed
    for n in range(5_000):  # many addresses in one window (an IPv6 /64 has plenty)
        limiter.hit(f"addr:2001:db8::{n:x}")
        if n % 100 == 0:
            assert not limiter.hit("key:busy").allowed  # used lately: kept, still limited
    assert len(limiter._log) <= 1_000
