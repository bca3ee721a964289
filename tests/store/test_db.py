"""Pooled PostgreSQL connections (`store.database.db.make_engine`): one the database
dropped while it sat idle in the pool is replaced before use; one in steady use is
not checked, and the error of its first use makes the pool start afresh. Reads
(`store.database.db.Reads`) on the primary hold no transaction between their
statements; on a replica they are one snapshot. SQLite stores are made with 8 KiB
pages, and one made before with 4 KiB pages is served as it is; a pooled SQLite
connection keeps its busy timeout after a build that found the store locked."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from pipeline_reference import select as reference_select
from sqlalchemy import exc as sa_exc, text

from store.access import accounts
from store.database import db
from store.database.schema import Buyer, Feed
from store.intake.demo import load_demo
from store.merging import merge
from store.views.records import load_records
from store.reference.taxonomy import default_taxonomy
from store.views import builds, upkeep
from store.views.lineups import Lineups
from store.query import parse_query
from tests.conftest import TEST_PG, need_service
from tests.paused_build import paused_build


@pytest.fixture
def pg_engine():
    engine = db.make_engine(TEST_PG)
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except sa_exc.OperationalError as exc:  # pragma: no cover - depends on the machine
        engine.dispose()
        need_service("PostgreSQL", exc)
    yield engine
    engine.dispose()


def backend_pid(engine) -> int:
    with engine.connect() as connection:
        return connection.execute(text("SELECT pg_backend_pid()")).scalar_one()


def drop(engine, pid: int) -> None:
    """End the server process of this test's own connection `pid`, as a restart would."""
    killer = db.make_engine(TEST_PG)
    try:
        with killer.connect() as connection:
            assert connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}).scalar_one()
    finally:
        killer.dispose()


def test_a_connection_dropped_while_idle_in_the_pool_is_replaced_before_use(pg_engine, monkeypatch):
    monkeypatch.setattr(db, "IDLE_CHECK_S", 0.2)
    pid = backend_pid(pg_engine)
    drop(pg_engine, pid)
    time.sleep(0.3)
    with pg_engine.connect() as connection:  # no error: checked, found dead, replaced
        assert connection.execute(text("SELECT pg_backend_pid()")).scalar_one() != pid


def test_a_connection_in_steady_use_is_not_checked_and_its_error_renews_the_pool(pg_engine, monkeypatch):
    monkeypatch.setattr(db, "IDLE_CHECK_S", 60.0)
    pids = set()
    with pg_engine.connect() as first, pg_engine.connect() as second:  # two pooled connections
        pids = {c.execute(text("SELECT pg_backend_pid()")).scalar_one() for c in (first, second)}
    for pid in pids:
        drop(pg_engine, pid)
    with pytest.raises(sa_exc.OperationalError) as failed:
        with pg_engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    assert failed.value.connection_invalidated
    # The error dropped every connection the pool held, the other dead one too.
    with pg_engine.connect() as connection:
        assert connection.execute(text("SELECT pg_backend_pid()")).scalar_one() not in pids


def in_own_transaction(session) -> bool:
    """Whether the statement running now began its transaction (after another one) in
    `session` (or a connection)."""
    session.execute(text("SELECT 1"))
    return session.execute(
        text("SELECT xact_start = query_start FROM pg_stat_activity WHERE pid = pg_backend_pid()")
    ).scalar_one()


def test_a_read_on_the_primary_runs_statement_by_statement_and_on_a_replica_in_one_snapshot(pg_engine):
    replica = db.make_engine(TEST_PG, read_only=True)
    try:
        primary = db.Reads(db.make_sessionmaker(pg_engine))
        assert primary.run(in_own_transaction)  # no BEGIN and COMMIT round trips
        on_replica = db.Reads(db.make_sessionmaker(pg_engine), [db.make_sessionmaker(replica, replica=True)])
        assert not on_replica.run(in_own_transaction)  # one REPEATABLE READ transaction
    finally:
        replica.dispose()
    with pg_engine.connect() as connection:  # the pooled connection is back to transactions
        assert not in_own_transaction(connection)


def test_a_new_sqlite_store_has_8_kib_pages_and_an_older_store_with_4_kib_pages_is_served_as_it_is(tmp_path, monkeypatch):
    """8 KiB pages: a daily update's writes at random places of the views' trees, a
    page a system call, take ~28% fewer calls (docs/architecture.md). A store made
    before keeps SQLite's 4 KiB until an operator converts it (docs/deploying.md): this
    code opens it, brings its views up to date and reads them as the merge says."""
    engine = db.make_engine(f"sqlite:///{tmp_path / 'new.db'}")
    db.create_schema(engine)
    assert db.sqlite_page_bytes(engine) == 8192
    engine.dispose()

    monkeypatch.setattr(db, "SQLITE_PAGE_BYTES", 4096)  # as every store was made before
    older = f"sqlite:///{tmp_path / 'older.db'}"
    engine = db.make_engine(older)
    db.create_schema(engine)
    with db.transaction(db.make_sessionmaker(engine)) as session:
        demo = load_demo(session, 400, seed=3, anchor=dt.date(2026, 11, 23))
    engine.dispose()
    monkeypatch.undo()

    engine = db.make_engine(older)
    assert db.sqlite_page_bytes(engine) == 4096
    sessions = db.make_sessionmaker(engine)
    with db.transaction(sessions) as session:  # a subscription change: a view written in the old store
        feed = accounts.entitled_feeds(session, demo["buyer_id"])[0]
        accounts.set_subscription(session, session.get(Buyer, demo["buyer_id"]), session.get(Feed, feed.id), "cancelled")
    query = parse_query({"latest": ["true"]}, default_taxonomy().parse_filter)[0]
    with db.transaction(sessions) as session:
        records = load_records(session, [f.id for f in accounts.entitled_feeds(session, demo["buyer_id"])])
    expected = list(reference_select(merge.merge(records, query.merge), query)["id"])
    assert expected and list(Lineups(sessions).frame(demo["buyer_id"], query)["id"]) == expected
    assert db.sqlite_page_bytes(engine) == 4096
    engine.dispose()


def pooled_busy_timeouts(engine) -> list[int]:
    """SQLite's busy timeout (ms) of every connection idle in the engine's pool."""
    connections = [engine.connect() for _ in range(engine.pool.checkedin())]
    try:
        return [int(c.exec_driver_sql("PRAGMA busy_timeout").scalar_one()) for c in connections]
    finally:
        for connection in connections:
            connection.close()


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_refused_build_leaves_the_pooled_connections_waiting_for_writers(engine, sessions, store_settings):
    """Issue 49 item 3: a view build that found the store locked (a reader that may
    not wait, `wait=0`) set its connection's busy timeout to 0 for the build and,
    its transaction failed, could not set it back: from then on every write of the
    process on that pooled connection (a logout, a share link, a build) failed at once
    whenever another process wrote. The setting is restored on the raw connection."""
    with db.transaction(sessions) as session:
        payload = load_demo(session, 300, 7, dt.date(2024, 3, 1))
        feed_ids = sorted(f.id for f in accounts.entitled_feeds(session, payload["buyer_id"]))
    held, other = upkeep.ViewKey.of("all", feed_ids), upkeep.ViewKey.of("all", feed_ids[:1])
    assert set(pooled_busy_timeouts(engine)) == {int(db.SQLITE_BUSY_S * 1000)}
    with paused_build(store_settings, held):
        for key in (held, other):  # refused: held by the build; its row not addable under the lock
            with pytest.raises(builds.ViewBusy):
                builds.ensure(sessions, key, wait=0)
    assert set(pooled_busy_timeouts(engine)) == {int(db.SQLITE_BUSY_S * 1000)}
