"""Admission of API keys (C5; issue 16 item 1): every request is admitted by one
small query, which only reads, so every change to keys, buyers or subscriptions is
seen by the very next request, and the use of a key is written off the request path."""

from __future__ import annotations

from store.access import accounts
from store.database.db import transaction
from store.database.schema import Feed
from tests.api.conftest import assert_error


def _counting_admits(monkeypatch) -> list:
    calls = []
    original = accounts.admit

    def counted(connection, key):
        calls.append(key)
        return original(connection, key)

    monkeypatch.setattr(accounts, "admit", counted)
    return calls


def test_every_request_is_admitted_by_one_query(fresh_tiny_api, fresh_tiny, monkeypatch):
    calls = _counting_admits(monkeypatch)
    for _ in range(5):
        assert fresh_tiny_api.get("/v1/lineups").status_code == 200
    assert calls == [fresh_tiny["key"]] * 5  # no per-process memory of admissions


def test_a_cancelled_subscription_is_seen_by_the_next_request(fresh_tiny_api, fresh_tiny, sessions):
    source = {"source": fresh_tiny["a"]}
    assert fresh_tiny_api.get("/v1/lineups", params=source).status_code == 200
    assert fresh_tiny_api.get("/v1/lineups", params=source).status_code == 200
    with transaction(sessions) as session:
        buyer = accounts.find_buyer(session, fresh_tiny["buyer_id"])
        accounts.set_subscription(session, buyer, session.get(Feed, fresh_tiny["a"]), "cancelled")
    assert_error(fresh_tiny_api.get("/v1/lineups", params=source), 403, "FORBIDDEN")


def test_a_revoked_key_is_refused_by_the_next_request(fresh_tiny_api, fresh_tiny, sessions):
    for _ in range(2):
        assert fresh_tiny_api.get("/v1/lineups").status_code == 200
    with transaction(sessions) as session:
        accounts.revoke_key(session, accounts.find_key(session, fresh_tiny["key"]))
    assert_error(fresh_tiny_api.get("/v1/lineups"), 401, "UNAUTHORIZED")


def test_a_keys_use_is_written_once_a_minute_by_the_background_writer(fresh_tiny_api, fresh_tiny, sessions):
    for _ in range(3):
        assert fresh_tiny_api.get("/v1/sources").status_code == 200
    assert fresh_tiny_api.deps.usage.flush()
    with sessions() as session:
        first = accounts.find_key(session, fresh_tiny["key"]).last_used_at
    assert first is not None
    assert fresh_tiny_api.get("/v1/sources").status_code == 200
    assert fresh_tiny_api.deps.usage.flush()
    with sessions() as session:  # within the minute: not written again
        assert accounts.find_key(session, fresh_tiny["key"]).last_used_at == first


# `store.database.changes` (no longer used by admissions; kept for the read path's caches).
