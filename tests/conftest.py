"""Fixtures shared by every test package.

Every test that uses a store runs twice: on a fresh SQLite file, and in a fresh
schema of the PostgreSQL database `LINEUPS_TEST_PG` (default: the local `test`
database), dropped afterwards. Outside CI a PostgreSQL that does not answer skips the
second run; under `CI=true` it is a failure.
"""

from __future__ import annotations

import contextlib
import gc
import os
import uuid
from pathlib import Path
from typing import Iterator

import pytest
from sqlalchemy import text

IN_CI = os.environ.get("CI", "").lower() == "true"
TEST_PG = os.environ.get("LINEUPS_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


#: Where the suite's long tests are (`lineups serve` processes under load and faults,
#: PostgreSQL servers of their own, the benchmark); files with a test marked `slow` or
#: `browser` count too.
LONG_TESTS = ("tests/reliability/", "tests/production/", "tests/bench/")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items) -> None:
    """The files of long tests run first, each file's tests still together and in
    their order: with two pytest-xdist workers (pyproject.toml) the many short files
    then fill in at the end, instead of one worker running a long file alone while
    the other waits."""
    long_files = {
        item.nodeid.split("::")[0] for item in items
        if item.nodeid.startswith(LONG_TESTS) or item.get_closest_marker("slow") or item.get_closest_marker("browser")
    }
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in long_files)


@pytest.fixture(autouse=True)
def collector_unfrozen() -> Iterator[None]:
    """A test that starts the explorer in this process freezes the objects it holds
    then (`cli.process_objects.settle_objects`, as a server process does): afterwards they are
    the collector's again, so that no later test keeps an earlier one's garbage."""
    yield
    if gc.get_freeze_count():
        gc.unfreeze()


def need_service(name: str, error: Exception) -> None:
    """Skip outside CI, fail under CI, when a service the test needs is missing."""
    message = f"{name} is not answering: {error}"
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request) -> str:
    """The store back end a test runs on."""
    return request.param


@contextlib.contextmanager
def fresh_store_settings(backend: str, folder: Path, pg_url: str = TEST_PG) -> Iterator:
    """Settings of a fresh, empty store on `backend`: a SQLite file in `folder`, or a
    new schema of the PostgreSQL database `pg_url`, dropped afterwards (a PostgreSQL
    that does not answer: `need_service`). For fixtures of any scope."""
    from store.settings import Settings

    if backend == "sqlite":
        yield Settings(db_url=f"sqlite:///{folder / 'lineups.db'}", secrets=("test-secret-with-at-least-32-characters",))
        return
    from store.database.db import make_engine

    schema = "t_" + uuid.uuid4().hex[:16]
    admin = make_engine(pg_url)
    try:
        with admin.begin() as connection:
            connection.execute(text(f"CREATE SCHEMA {schema}"))
    except Exception as exc:  # pragma: no cover - depends on the machine
        admin.dispose()
        need_service("PostgreSQL", exc)
    try:
        yield Settings(db_url=pg_url, db_schema=schema, secrets=("test-secret-with-at-least-32-characters",))
    finally:
        with admin.begin() as connection:
            connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


@pytest.fixture
def store_settings(backend, tmp_path):
    """Settings of a fresh, empty store on `backend`."""
    with fresh_store_settings(backend, tmp_path) as settings:
        yield settings


@pytest.fixture
def engine(store_settings):
    """An engine on a fresh store with the schema and port directory in place."""
    from store.database.db import create_schema, engine_for

    engine = engine_for(store_settings)
    create_schema(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def sessions(engine):
    """The sessionmaker of the fresh store."""
    from store.database.db import make_sessionmaker

    return make_sessionmaker(engine)


@pytest.fixture
def session(sessions):
    """One session on the fresh store, rolled back unless the test commits."""
    with sessions() as session:
        yield session


@pytest.fixture
def cli_env(store_settings, monkeypatch):
    """Environment under which the `lineups` command line uses the fresh store."""
    monkeypatch.setenv("LINEUPS_DB", store_settings.db_url)
    monkeypatch.setenv("LINEUPS_SECRET", "test-secret-with-at-least-32-characters")
    if store_settings.db_schema:
        monkeypatch.setenv("LINEUPS_DB_SCHEMA", store_settings.db_schema)
    else:
        monkeypatch.delenv("LINEUPS_DB_SCHEMA", raising=False)
    return store_settings


REDIS_URL = os.environ.get("LINEUPS_TEST_REDIS", "redis://127.0.0.1:6379/15")


def worker_redis_url(url: str = REDIS_URL) -> str:
    """`url` for this pytest-xdist worker: worker gwN uses database 15 - N, so that
    one worker's clean-up of its test keys never empties another's (database 15
    without xdist, or for a URL that names no database number)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    base, _, number = url.rpartition("/")
    if not worker.startswith("gw") or not number.isdigit():
        return url
    return f"{base}/{(int(number) - int(worker[2:])) % 16}"


@pytest.fixture
def redis_url():
    """The URL of a real Redis (database 15, or this xdist worker's), emptied of test
    keys afterwards."""
    import redis

    url = worker_redis_url()
    client = redis.Redis.from_url(url, socket_connect_timeout=1)
    try:
        client.ping()
    except redis.RedisError as exc:
        need_service("Redis", exc)
    yield url
    for key in client.scan_iter("test-*"):
        client.delete(key)
    client.close()
