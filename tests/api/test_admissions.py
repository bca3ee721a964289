"""Remembered admissions of API keys (C5, issue 4 speed): a warm request is let in
without a query while the store is unchanged, and every change to keys, buyers or
subscriptions is still seen by the very next request."""

from __future__ import annotations

import asyncio
import sqlite3

from sqlalchemy import create_engine

from api.base import TurnStamp
from store import accounts
from store.changes import change_stamp
from store.db import transaction
from store.schema import Feed
from tests.api.conftest import assert_error


def _counting_admits(monkeypatch) -> list:
    calls = []
    original = accounts.admit

    def counted(connection, key):
        calls.append(key)
        return original(connection, key)

    monkeypatch.setattr(accounts, "admit", counted)
    return calls


def test_a_known_key_is_admitted_without_a_query_while_the_store_is_unchanged(
    fresh_tiny_api, fresh_tiny, store_settings, monkeypatch
):
    calls = _counting_admits(monkeypatch)
    for _ in range(5):
        assert fresh_tiny_api.get("/v1/lineups").status_code == 200
    # SQLite has a change stamp: a query, another after the first use of the key is
    # written (a commit), then the remembered admission. PostgreSQL has none here:
    # every request reads the store.
    assert len(calls) == (2 if store_settings.is_sqlite else 5)


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


def test_admissions_are_given_only_while_the_stamp_holds(sessions, fresh_tiny):
    stamp = [1]
    admissions = accounts.Admissions(lambda: stamp[0])
    with sessions() as session:
        admitted = admissions.admit(session.connection(), fresh_tiny["key"])
    assert admissions.cached(fresh_tiny["key"]) == admitted
    assert admissions.cached(fresh_tiny["revoked_key"]) is None  # refusals are not kept
    stamp[0] = 2
    assert admissions.cached(fresh_tiny["key"]) is None
    no_stamp = accounts.Admissions(lambda: None)
    with sessions() as session:
        no_stamp.admit(session.connection(), fresh_tiny["key"])
    assert no_stamp.cached(fresh_tiny["key"]) is None


def test_the_sqlite_stamp_moves_with_every_commit_of_another_connection(tmp_path):
    path = tmp_path / "store.db"
    writer = sqlite3.connect(path)
    writer.execute("CREATE TABLE t (x)")
    writer.commit()
    stamp = change_stamp(create_engine(f"sqlite:///{path}"))
    before = stamp()
    assert stamp() == before
    writer.execute("INSERT INTO t VALUES (1)")
    writer.commit()
    assert stamp() not in (None, before)


def test_stores_without_a_stamp_say_so():
    assert change_stamp(create_engine("sqlite://"))() is None
    assert change_stamp(create_engine("postgresql+psycopg://u@127.0.0.1:1/x"))() is None


def test_the_event_loop_reads_the_stamp_once_per_turn():
    reads = []

    def stamp():
        reads.append(1)
        return len(reads)

    turn_stamp = TurnStamp(stamp)

    async def requests_over_three_turns():
        seen = []
        for _ in range(3):
            seen.append([turn_stamp() for _ in range(4)])  # four requests admitted in one turn
            await asyncio.sleep(0)  # the loop turns
        return seen

    assert asyncio.run(requests_over_three_turns()) == [[1] * 4, [2] * 4, [3] * 4]
    assert len(reads) == 3


def test_a_key_revoked_between_two_turns_is_refused_in_the_second(sessions, fresh_tiny):
    stamp = [1]
    admissions = accounts.Admissions(lambda: stamp[0])
    turn_stamp = TurnStamp(admissions.stamp)
    with sessions() as session:
        admitted = admissions.admit(session.connection(), fresh_tiny["key"])

    async def two_turns():
        first = admissions.cached(fresh_tiny["key"], stamp=turn_stamp)
        stamp[0] = 2  # a commit of another process (the key revoked)
        same_turn = admissions.cached(fresh_tiny["key"], stamp=turn_stamp)
        await asyncio.sleep(0)
        return first, same_turn, admissions.cached(fresh_tiny["key"], stamp=turn_stamp)

    assert asyncio.run(two_turns()) == (admitted, admitted, None)
