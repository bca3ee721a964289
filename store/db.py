"""Engines and sessions.

One engine and one sessionmaker are made at start-up (after any worker process has
forked) and handed to whoever needs them; the caller owns each session's lifetime.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from sqlalchemy import Engine, create_engine, event, func, insert, select
from sqlalchemy.orm import Session, sessionmaker

from store.ports import default_directory
from store.schema import Port

#: Seconds to wait for a new PostgreSQL connection.
CONNECT_TIMEOUT_S = 5


def make_engine(db_url: str, statement_timeout_ms: int = 30_000, schema: str | None = None) -> Engine:
    """An engine for `db_url` with connections checked on checkout.

    SQLite gets WAL journalling and foreign keys; PostgreSQL a statement timeout so
    that one heavy query cannot hold a worker forever, and `schema` as its search
    path when given."""
    if db_url.startswith("sqlite"):
        engine = create_engine(db_url, connect_args={"timeout": 30, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection, _record):  # pragma: no cover - trivial
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            if ":memory:" not in db_url:
                cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        return engine
    connect_args = {}
    if db_url.startswith("postgresql"):
        options = f"-c statement_timeout={int(statement_timeout_ms)}"
        if schema:
            options += f" -c search_path={schema}"
        connect_args["options"] = options
        # A database host that does not answer fails a request in seconds, not after
        # the operating system's TCP timeout of minutes.
        connect_args["connect_timeout"] = CONNECT_TIMEOUT_S
    return create_engine(
        db_url,
        pool_pre_ping=True,
        pool_size=5,
        max_overflow=10,
        pool_timeout=10,
        connect_args=connect_args,
    )


def engine_for(settings) -> Engine:
    """The engine `settings` describe."""
    return make_engine(settings.db_url, settings.statement_timeout_ms, settings.db_schema)


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


def open_store(engine: Engine, db_url: str) -> None:
    """Make an empty store (through the migrations) or check that an existing one is
    at the newest schema. Raises store.migrate.SchemaBehind for an older store, whose
    message says what to run: upgrading a live store is the operator's decision."""
    from store.migrate import check_current, current_revision

    if current_revision(engine) is None:
        create_schema(engine)
    else:
        check_current(engine, db_url)


def create_schema(engine: Engine) -> None:
    """Bring the store to the newest schema through the migrations, and load the port
    directory once."""
    from store.migrate import upgrade

    upgrade(engine)
    with engine.begin() as connection:
        if connection.execute(select(func.count()).select_from(Port)).scalar_one() == 0:
            rows = [
                {
                    "unlocode": p.unlocode,
                    "name": p.name,
                    "country_code": p.country_code,
                    "country_name": p.country_name,
                    "latitude": p.latitude,
                    "longitude": p.longitude,
                    "timezone": p.timezone,
                }
                for p in default_directory().all()
            ]
            connection.execute(insert(Port), rows)


@contextmanager
def transaction(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A session that commits when the block succeeds and rolls back when it raises."""
    with factory() as session:
        with session.begin():
            yield session
