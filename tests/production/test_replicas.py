"""Read replicas (issue 7): the API's pure reads on a real PostgreSQL streaming
replica, auth and writes on the primary (docs/deploying.md, section 5).

A primary and its hot standby are this module's own (tests/production/replication.py);
each test has a fresh schema on the primary, replayed to the standby. The tests show
that answers through the replica are the primary's, that a lagging replica gives
older but whole answers while a revoked key or a cancelled subscription acts at once,
that nothing is written through the replica, and that a stopped replica costs a
fallback to the primary, not a wrong answer.
"""

from __future__ import annotations

import dataclasses
import logging
import re

import pytest
import requests
from sqlalchemy import event, select

from store.access import accounts, links
from store.database.db import Reads, create_schema, engine_for, make_engine, make_sessionmaker, transaction
from store.database.schema import Feed, ShareLink
from store.settings import Settings, SettingsError
from tests.api.conftest import Servers
from tests.api.tiny_data import add_feed, add_records, load_tiny
from tests.conftest import fresh_store_settings, need_service
from tests.production.conftest import store_env
from tests.production.replication import PostgresPair

WRITES = re.compile(r"^\s*(INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|TRUNCATE)\b", re.IGNORECASE)
NEW_CALL = {"ref": "A9", "port_unlocode": "BRSSZ", "vessel_name": "Late Arrival", "commodity": "Soybeans",
            "eta": "2024-03-15T00:00:00Z", "updated_at": "2024-02-28T00:00:00Z"}


@pytest.fixture(scope="module")
def pair():
    """A primary and its streaming replica, for this module."""
    pair = None
    try:
        pair = PostgresPair()
        pair.start()
    except Exception as exc:  # noqa: BLE001 - no programs, no postgres user, …
        if pair is not None:
            pair.stop()
        need_service("A PostgreSQL primary with a streaming replica", exc)
    yield pair
    pair.stop()


@dataclasses.dataclass
class Replicated:
    """A fresh store on the primary with the hand-made data, replayed to the replica."""

    settings: Settings  #: with the replica in `db_replicas`
    sessions: object  #: the primary's
    replica: object  #: the replica's read-only engine
    statements: list[str]  #: every statement sent to the replica
    tiny: dict

    def reads(self) -> Reads:
        return Reads(self.sessions, [make_sessionmaker(self.replica, replica=True)])


@pytest.fixture
def replicated(pair, tmp_path):
    with fresh_store_settings("postgresql", tmp_path, pair.primary_url) as plain:
        settings = dataclasses.replace(plain, db_replicas=(pair.replica_url,))
        engine = engine_for(settings)
        replica = make_engine(pair.replica_url, schema=settings.db_schema, read_only=True)
        statements: list[str] = []
        event.listen(replica, "before_cursor_execute", lambda *args: statements.append(args[2]))
        try:
            create_schema(engine)
            sessions = make_sessionmaker(engine)
            tiny = load_tiny(sessions)
            pair.wait_for_replay()
            yield Replicated(settings, sessions, replica, statements, tiny)
        finally:
            replica.dispose()
            engine.dispose()


@pytest.fixture
def servers(replicated):
    servers = Servers(replicated.sessions, replicated.settings)
    yield servers
    servers.stop()


def answers(base_url: str, key: str, paths: list[str]) -> dict[str, tuple[int, str]]:
    """Status and body of each path (share links without the key)."""
    out = {}
    for path in paths:
        headers = {} if path.startswith("/v1/share/") else {"X-API-Key": key}
        response = requests.get(base_url + path, headers=headers, timeout=30)
        out[path] = (response.status_code, response.text)
    return out


@pytest.mark.postgres
def test_answers_through_the_replica_are_the_primarys_and_nothing_is_written_there(pair, replicated, servers, caplog):
    tiny = replicated.tiny
    with transaction(replicated.sessions) as session:
        link, token = links.create_link(
            session, accounts.find_buyer(session, tiny["buyer_id"]), {"port": ["BRSSZ"]}, ("test-secret-with-at-least-32-characters",)
        )
    primary_only = servers(tiny["key"])
    row_id = primary_only.lineups()["data"][0]["id"]
    paths = [
        "/v1/lineups", "/v1/lineups?merge=by_source&format=csv", "/v1/lineups?latest=true&limit=2",
        "/v1/sources", f"/v1/schema/{tiny['a']}", f"/v1/schema/{tiny['c']}",
        f"/v1/lineups/{row_id}/provenance", f"/v1/share/{token}",
    ]
    expected = answers(primary_only.base_url, tiny["key"], paths)
    assert {status for status, _ in expected.values()} == {200, 403}
    pair.wait_for_replay()  # the views those reads built on the primary

    with caplog.at_level(logging.INFO, logger="lineups.db"):
        replica_api = servers(tiny["key"], reads=replicated.reads())
        through_replica = answers(replica_api.base_url, tiny["key"], paths)
    assert primary_only.deps.usage.flush() and replica_api.deps.usage.flush()  # uses are written off the request path (issue 16 item 1)

    assert through_replica == expected
    reads = [s for s in replicated.statements if "FROM records" in s or "FROM feeds" in s]
    assert reads, "the data was not read from the replica"
    assert not [s for s in replicated.statements if WRITES.match(s)]
    assert "Replica" not in caplog.text  # no fallback: every read worked on the replica
    with replicated.sessions() as session:  # the uses were counted on the primary
        assert session.scalar(select(ShareLink.use_count).where(ShareLink.id == link.id)) == 2


@pytest.mark.postgres
def test_a_lagging_replica_gives_older_whole_answers_while_auth_acts_at_once(pair, replicated, servers, caplog):
    tiny = replicated.tiny
    with transaction(replicated.sessions) as session:
        second_key, _ = accounts.create_key(session, accounts.find_buyer(session, tiny["buyer_id"]))
    pair.wait_for_replay()
    primary_only = servers(tiny["key"])
    replica_api = servers(tiny["key"], reads=replicated.reads())
    before = replica_api.lineups(limit=500)
    assert replica_api.get("/v1/lineups", key=second_key).status_code == 200
    # That first read built the buyer's view on the primary (views are written there);
    # the replica replays it, as it replays records.
    pair.wait_for_replay()

    pair.pause_replay()
    try:
        with transaction(replicated.sessions) as session:  # an ingest the replica has not replayed
            add_records(session, session.get(Feed, tiny["a"]), [NEW_CALL])
        fresh = primary_only.lineups(limit=500)
        assert "Late Arrival" in {row["vessel_name"] for row in fresh["data"]}
        # The primary's newer feed version never labels the replica's older records.
        assert replica_api.lineups(limit=500) == before
        assert replica_api.lineups(limit=500, port="BRSSZ")["data"] == [
            row for row in before["data"] if row["port_unlocode"] == "BRSSZ"
        ]

        with transaction(replicated.sessions) as session:
            accounts.revoke_key(session, accounts.find_key(session, second_key))
            buyer = accounts.find_buyer(session, tiny["buyer_id"])
            accounts.set_subscription(session, buyer, session.get(Feed, tiny["b"]), "cancelled")
        assert replica_api.get("/v1/lineups", key=second_key).status_code == 401
        sources = replica_api.get("/v1/sources").json()["sources"]
        assert [source["id"] for source in sources] == [tiny["a"]]
        assert replica_api.get(f"/v1/schema/{tiny['b']}").status_code == 403
        assert {row["source_id"] for row in replica_api.lineups(limit=500)["data"]} == {tiny["a"]}

        with transaction(replicated.sessions) as session:  # a feed the replica has never seen
            feed = add_feed(session, "Echo New Lineup", ["BRSSZ"])
            add_records(session, feed, [{**NEW_CALL, "ref": "E1", "vessel_name": "Echo Star"}])
            accounts.set_subscription(session, accounts.find_buyer(session, tiny["buyer_id"]), feed, "active")
        with caplog.at_level(logging.INFO, logger="lineups.db"):
            assert replica_api.lineups(limit=500) == primary_only.lineups(limit=500)  # read on the primary
        assert "is behind the primary" in caplog.text
    finally:
        pair.resume_replay()

    caught_up = replica_api.lineups(limit=500)
    assert caught_up == primary_only.lineups(limit=500)
    assert "Late Arrival" in {row["vessel_name"] for row in caught_up["data"]}


@pytest.mark.postgres
def test_serve_with_a_stopped_replica_answers_from_the_primary(pair, replicated, servers, served):
    tiny, settings = replicated.tiny, replicated.settings
    env = store_env(settings.db_url, settings.db_schema, LINEUPS_DB_REPLICAS="postgresql+psycopg://nobody@127.0.0.1:1/x")
    server = served(env, "--db-replica", pair.replica_url)  # the flag wins over the environment
    assert f"reads from replica {pair.replica_url}" in server.log()
    paths = ["/v1/sources", f"/v1/schema/{tiny['a']}", "/v1/lineups?port=BRSSZ", "/v1/lineups?merge=by_source"]
    expected = answers(servers(tiny["key"]).base_url, tiny["key"], paths)
    assert answers(server.base_url, tiny["key"], paths[:2]) == {path: expected[path] for path in paths[:2]}
    assert "Replica" not in server.log()

    pair.stop_replica()
    try:
        assert answers(server.base_url, tiny["key"], paths) == expected
        assert "failed (OperationalError" in server.log() and "reading from the primary" in server.log()
        revoked = requests.get(f"{server.base_url}/v1/sources", headers={"X-API-Key": tiny["revoked_key"]}, timeout=30)
        assert revoked.status_code == 401
    finally:
        pair.start_replica()


def test_replica_settings():
    env = {"LINEUPS_DB": "postgresql+psycopg://a@db/x", "LINEUPS_DB_REPLICAS": " postgresql://r1/x, ,postgresql://r2/x"}
    settings = Settings.load(env)
    assert settings.db_replicas == ("postgresql://r1/x", "postgresql://r2/x")
    settings.check_replicas()
    with pytest.raises(SettingsError, match="PostgreSQL URL"):
        dataclasses.replace(settings, db_replicas=("sqlite:///copy.db",)).check_replicas()
    with pytest.raises(SettingsError, match="need a PostgreSQL store"):
        Settings(db_replicas=("postgresql://r1/x",)).check_replicas()
