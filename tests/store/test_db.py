"""Pooled PostgreSQL connections (`store.database.db.make_engine`): one the database
dropped while it sat idle in the pool is replaced before use; one in steady use is
not checked, and the error of its first use makes the pool start afresh. Reads
(`store.database.db.Reads`) on the primary hold no transaction between their
statements; on a replica they are one snapshot."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import exc as sa_exc, text

from store.database import db
from tests.conftest import TEST_PG, need_service


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
