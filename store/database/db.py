"""Engines and sessions.

One engine and one sessionmaker are made at start-up (after any worker process has
forked) and handed to whoever needs them; the caller owns each session's lifetime.

With read replicas (`Settings.db_replicas`), each process also makes one engine per
replica, and `Reads` sends pure reads to one of them: each read is one read-only
REPEATABLE READ transaction, so everything it reads (the feeds' data versions and
their records) comes from one snapshot of one database. A replica that fails is left
alone for a few seconds while its reads go to the primary.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Callable, Iterator, Sequence, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event, exc as sa_exc, func, insert, select, text
from sqlalchemy.orm import Session, sessionmaker

from store.reference.ports import default_directory
from store.database.migrate import check_current, current_revision, upgrade
from store.database.schema import Port

log = logging.getLogger("lineups.db")
T = TypeVar("T")
#: Seconds to wait for a new PostgreSQL connection.
CONNECT_TIMEOUT_S = 5
#: Seconds a SQLite write waits for the one write lock held by another process.
SQLITE_BUSY_S = 30.0
#: Bytes of a SQLite page in a store this code creates (SQLite's default is 4,096): a
#: daily update changes rows at random places in seven trees of `merged_rows`, a page
#: read or written per system call, and at 8 KiB it makes ~28% fewer calls. At
#: 1,000,000 records, six alternating pairs of updates on copies of one store: median
#: 2.58 -> 2.34 s, faster in each pair; 16 KiB 2.45 s. Pages/s the same (192 -> 197
#: median of six passes). A store keeps the page size it was made with
#: (docs/deploying.md: converting one).
SQLITE_PAGE_BYTES = 8192
#: Seconds a replica that failed is left alone (its reads go to the primary).
REPLICA_PAUSE_S = 5.0
#: `Session.info` key that marks the sessions of a replica.
REPLICA = "replica"


class ReplicaBehind(Exception):
    """A replica has not replayed something the primary already has (a feed that a
    buyer is entitled to): this read must be made on the primary."""


def make_engine(
    db_url: str, statement_timeout_ms: int = 30_000, schema: str | None = None, read_only: bool = False
) -> Engine:
    """An engine for `db_url`; pooled connections idle for a while are checked
    before use (`_check_when_idle`).

    SQLite gets WAL journalling and foreign keys; PostgreSQL a statement timeout so
    that one heavy query cannot hold a worker forever, and `schema` as its search
    path when given. `read_only` (replicas): every transaction is read-only and
    REPEATABLE READ, one snapshot from its first query to its end."""
    if db_url.startswith("sqlite"):
        engine = create_engine(db_url, connect_args={"timeout": SQLITE_BUSY_S, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection, _record):  # pragma: no cover - trivial
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            # Before the first write of a new file; nothing for an existing one.
            cursor.execute(f"PRAGMA page_size={SQLITE_PAGE_BYTES}")
            if ":memory:" not in db_url:
                cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        return engine
    connect_args: dict[str, Any] = {}
    if db_url.startswith("postgresql"):
        options = f"-c statement_timeout={int(statement_timeout_ms)}"
        if schema:
            options += f" -c search_path={schema}"
        if read_only:
            options += " -c default_transaction_read_only=on"
        connect_args["options"] = options
        # A database host that does not answer fails a request in seconds, not after
        # the operating system's TCP timeout of minutes.
        connect_args["connect_timeout"] = CONNECT_TIMEOUT_S
    engine = create_engine(
        db_url,
        pool_size=5,
        max_overflow=10,
        pool_timeout=10,
        connect_args=connect_args,
        **({"isolation_level": "REPEATABLE READ"} if read_only else {}),
    )
    _check_when_idle(engine)
    return engine


#: A pooled connection back in the pool for longer than this is checked before its
#: next use (`_check_when_idle`).
IDLE_CHECK_S = 1.0


def _check_when_idle(engine: Engine) -> None:
    """Check a pooled connection with `SELECT 1` before its next use when it has
    been idle for `IDLE_CHECK_S` or more, and replace it when the database dropped it
    (a restart); a connection in steady use is not checked.

    SQLAlchemy's `pool_pre_ping` checks every checkout: on PostgreSQL a round trip, and
    a page of /v1/lineups checks out twice (the key, then the page). With this check,
    and the key read outside a transaction (`api.base`), 750 distinct first pages of
    the mixed workload at 250,000 records, one after the other, cost PostgreSQL
    2.0-2.7 ms of CPU each instead of 2.7-2.9, and took 5.1-6.6 ms instead of
    6.5-6.8 (three alternating runs, 2026-11-27). Under load a dead connection is found
    by the error of its first use: SQLAlchemy then drops every connection the pool
    held (they shared the server that went away), and that request gets the
    contract's 500, as requests during the outage do; an idle server's connections,
    which no error has found, are checked here first (tests/store/test_db.py,
    tests/production/test_database_restart.py). The pattern is SQLAlchemy's own
    ("Disconnect Handling - Pessimistic": a checkout listener raising
    DisconnectionError)."""

    @event.listens_for(engine, "checkin")
    def _returned(_dbapi_connection, record) -> None:
        record.info["returned_at"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _check(dbapi_connection, record, _proxy) -> None:
        returned = record.info.get("returned_at")
        if returned is None or time.monotonic() - returned < IDLE_CHECK_S:
            return  # new, or in steady use
        try:
            cursor = dbapi_connection.cursor()
            try:
                cursor.execute("SELECT 1")
            finally:
                cursor.close()
            dbapi_connection.rollback()  # idle again, as the pool hands it out
        except engine.dialect.loaded_dbapi.Error as exc:
            if engine.dialect.is_disconnect(exc, dbapi_connection, None):
                raise sa_exc.DisconnectionError(str(exc)) from exc
            raise


def engine_for(settings) -> Engine:
    """The engine `settings` describe."""
    return make_engine(settings.db_url, settings.statement_timeout_ms, settings.db_schema)


def replica_engines_for(settings) -> list[Engine]:
    """One read-only engine per configured replica (`Settings.db_replicas`)."""
    return [
        make_engine(url, settings.statement_timeout_ms, settings.db_schema, read_only=True)
        for url in settings.db_replicas
    ]


def make_sessionmaker(engine: Engine, replica: bool = False) -> sessionmaker[Session]:
    """Sessions on `engine`; `replica` marks them (`is_replica`) for data functions
    that must read what the primary gave them again from the replica."""
    return sessionmaker(engine, expire_on_commit=False, info={REPLICA: True} if replica else None)


def is_replica(session: Session) -> bool:
    """True when `session` reads a replica (made by `make_sessionmaker(replica=True)`)."""
    return bool(session.info.get(REPLICA))


class Reads:
    """Where the API's pure reads go: this process's replica, else the primary.

    `run(work, *args)` calls `work(session, *args)` in a session of its own and
    returns what it returns. With replicas, the session is one of a replica (the
    process's own first, `first` picking it, then the others), one read-only
    REPEATABLE READ transaction; on a PostgreSQL primary, each statement on its own
    (`_statement_by_statement`). A replica that fails (cannot connect, or errs) is left
    alone for `pause` seconds and the same work runs on the next one or on the
    primary, so a replica's trouble costs time, never a wrong answer; `ReplicaBehind`
    from `work` sends that one read to the primary. Work must only read: it may run
    twice.
    Errors of the primary, and the service's own errors (`LineupsError`), propagate."""

    def __init__(
        self,
        primary: sessionmaker[Session],
        replicas: Sequence[sessionmaker[Session]] = (),
        first: int = 0,
        pause: float = REPLICA_PAUSE_S,
    ):
        self.primary = _statement_by_statement(primary)
        start = first % len(replicas) if replicas else 0
        self.replicas = [*replicas[start:], *replicas[:start]]
        self.pause = pause
        self._lock = threading.Lock()
        self._resting: dict[int, float] = {}  #: replica index → monotonic time it may be tried again

    def run(self, work: Callable[..., T], *args: Any) -> T:
        for index, factory in enumerate(self.replicas):
            if not self._usable(index):
                continue
            try:
                result = _in_transaction(factory, work, args)
            except ReplicaBehind as behind:
                log.info("Replica %s is behind the primary (%s): this read goes to the primary", _name(factory), behind)
                break
            except sa_exc.SQLAlchemyError as error:
                self._rest(index, factory, error)
                continue
            self._recovered(index, factory)
            return result
        return _in_transaction(self.primary, work, args)

    def describe(self) -> str:
        """This process's first replica, for logs (no password); "" without replicas."""
        return _name(self.replicas[0]) if self.replicas else ""

    def _usable(self, index: int) -> bool:
        with self._lock:
            until = self._resting.get(index)
        return until is None or time.monotonic() >= until

    def _rest(self, index: int, factory: sessionmaker[Session], error: Exception) -> None:
        with self._lock:
            self._resting[index] = time.monotonic() + self.pause
        log.warning(
            "Replica %s failed (%s: %s); reading from %s for %g s",
            _name(factory), type(error).__name__, str(error).split("\n", 1)[0][:200],
            "the next replica" if index + 1 < len(self.replicas) else "the primary", self.pause,
        )

    def _recovered(self, index: int, factory: sessionmaker[Session]) -> None:
        if index in self._resting:
            with self._lock:
                self._resting.pop(index, None)
            log.info("Replica %s answers again", _name(factory))


def _statement_by_statement(factory: sessionmaker[Session]) -> sessionmaker[Session]:
    """`factory`'s sessions, on PostgreSQL with every statement its own transaction
    (AUTOCOMMIT). Under READ COMMITTED, PostgreSQL's default, each statement of a
    transaction reads a snapshot of its own anyway, so a read loses nothing by it, and
    saves the BEGIN and COMMIT round trips of every request: 600 distinct first pages
    of the mixed workload at 250,000 records, one after another, cost PostgreSQL
    1.7-2.1 ms of CPU each instead of 2.1-2.8, and came 210-256 a second instead of
    108-165 (three alternating runs, 2026-11-28). Replicas keep their transaction:
    there it is one snapshot (REPEATABLE READ). SQLite's driver opens no transaction
    for a read."""
    bind = factory.kw.get("bind")
    if bind is None or bind.dialect.name != "postgresql":
        return factory
    options = {name: value for name, value in factory.kw.items() if name != "bind"}
    return sessionmaker(bind.execution_options(isolation_level="AUTOCOMMIT"), **options)


def _in_transaction(factory: sessionmaker[Session], work: Callable[..., T], args: tuple) -> T:
    with factory() as session:
        with session.begin():
            return work(session, *args)


def _name(factory: sessionmaker[Session]) -> str:
    """The replica's address for logs (no password)."""
    bind = factory.kw.get("bind")
    return bind.url.render_as_string(hide_password=True) if bind is not None else "?"


def open_store(engine: Engine, db_url: str) -> None:
    """Make an empty store (through the migrations) or check that an existing one is
    at the newest schema. Raises store.database.migrate.SchemaBehind for an older store, whose
    message says what to run: upgrading a live store is the operator's decision."""
    if current_revision(engine) is None:
        create_schema(engine)
    else:
        check_current(engine, db_url)


def create_schema(engine: Engine) -> None:
    """Bring the store to the newest schema through the migrations, and load the port
    directory once."""
    upgrade(engine)
    load_ports(engine)


def load_ports(engine: Engine) -> None:
    """Load the port directory into a store that has none yet."""
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


def sqlite_page_bytes(engine: Engine) -> int | None:
    """The page size of a SQLite store (a store made before 2026-11-29 keeps 4,096
    until converted: docs/deploying.md); None on PostgreSQL."""
    if engine.dialect.name != "sqlite":
        return None
    with engine.connect() as connection:
        return int(connection.exec_driver_sql("PRAGMA page_size").scalar_one())


def sqlite_page_cache(session: Session, mib: int = 256) -> AbstractContextManager[None]:
    """On SQLite, a page cache of `mib` for the writes of a large transaction (an
    ingest, a view build: every index is written all over, and the default 2 MiB makes
    SQLite read the same pages again and again; a 1,000,000-record ingest into a fresh
    store, 21,400 → 31,600 rows/s), back to what it was after, so that pooled
    connections stay small (nested, the outer one's size)."""
    return _sqlite_setting(session, "cache_size", -mib * 1024)


def sqlite_busy_timeout(session: Session, seconds: float) -> AbstractContextManager[None]:
    """On SQLite, a statement waits at most `seconds` for another connection's write
    lock (`SQLITE_BUSY_S` otherwise), back to what it was after."""
    return _sqlite_setting(session, "busy_timeout", int(seconds * 1000))


def analyze_if_stale(session: Session, table: str, written: int) -> bool:
    """Take the planner's statistics of `table` again, in the session's transaction,
    when `written` rows are at least `STALE_SHARE` of the rows its statistics know, or
    it has none yet; returns whether it did. That is PostgreSQL's autovacuum's own rule
    (`autovacuum_analyze_scale_factor`), applied where the write happens, on both
    stores: autovacuum may be off (it is off on this project's machines) or minutes
    behind, and SQLite has none. Without statistics of the records, PostgreSQL took a
    feed for 250 records instead of 50,000 and answered a daily update's lookups with
    scans of every record, and SQLite took the (feed, ref) key for the best way to a
    list of 600 names (0.9 s instead of 27 ms at 1,000,000 records). PostgreSQL's ANALYZE reads a sample (30,000 rows: 0.8 s for
    1,000,000 records), SQLite's every index whole (0.46 s)."""
    known = counted_rows(session, table)
    if known is not None and written < STALE_SHARE * known:
        return False
    if session.connection().dialect.name == "sqlite":  # every row, not a sample: `store.views.upkeep._analyze`
        session.execute(text("PRAGMA analysis_limit = 0"))
        session.execute(text(f"ANALYZE {table}"))
        return True
    return analyze_unless_busy(session, table)


def vacuum_after_commit(session: Session, table: str, written: int) -> None:
    """On PostgreSQL, once the session's transaction has committed, VACUUM `table`
    when the rows written since its last vacuum (PostgreSQL's count of them before
    this transaction, and the `written` rows of this one) are at least `STALE_SHARE`
    of its rows: autovacuum's rule for inserts (`autovacuum_vacuum_insert_scale_factor`),
    applied where the write happens, as `analyze_if_stale` does for statistics.

    A vacuum marks the table's pages all-visible, which is what lets the views'
    lookups of the records read their covering indexes alone (index-only scans): a
    daily update's read of the identities of ~600 names at 1,000,000 records took
    0.71 s through the table, 0.18 s from the (name) index alone once vacuumed
    (2026-11-29). Autovacuum does it too, when it is on (it is off on this project's
    machines), a minute or more later, and for inserts only past a fifth of the
    table. After the commit, since VACUUM cannot run in a transaction; it skips the
    table when another holds it (`SKIP_LOCKED`: a vacuum or an analysis under way);
    a failure is logged, the write being committed by then. PostgreSQL's count lags
    its writes by up to seconds, so a write counted after a vacuum that followed it
    can bring the next vacuum early: one more pass over the pages written since."""
    if session.get_bind().dialect.name != "postgresql":
        return
    root = session.get_transaction()
    pending = session.info.get(_TO_VACUUM)
    if pending is None or pending[0] is not root:  # the transaction's first
        pending = session.info[_TO_VACUUM] = (root, {})
        if not event.contains(session, "after_commit", _vacuum_written):
            event.listen(session, "after_commit", _vacuum_written)
    counts = pending[1]
    if table not in counts:  # written before this transaction: its own are not counted yet
        since = session.execute(text(
            "SELECT n_ins_since_vacuum + n_dead_tup FROM pg_stat_user_tables WHERE relid = to_regclass(:t)"
        ), {"t": table}).scalar()
        counts[table] = int(since or 0)
    counts[table] += written


def _vacuum_written(session: Session) -> None:
    """`vacuum_after_commit`'s work, once its transaction has committed (SQLAlchemy
    calls this for a savepoint's release too, and for every later transaction of the
    session)."""
    if session.in_nested_transaction():
        return
    root, counts = session.info.get(_TO_VACUUM, (None, {}))
    if root is not session.get_transaction():
        return
    del session.info[_TO_VACUUM]
    engine = session.get_bind()
    for table, written in counts.items():
        try:
            with engine.connect() as connection:
                connection = connection.execution_options(isolation_level="AUTOCOMMIT")
                known = _reltuples(connection, table)
                if known is not None and written < STALE_SHARE * known:
                    continue
                connection.execute(text("SET statement_timeout = 0"))  # a vacuum after a large load
                try:
                    connection.execute(text(f"VACUUM (SKIP_LOCKED) {table}"))
                finally:
                    connection.execute(text("RESET statement_timeout"))
        except sa_exc.SQLAlchemyError:
            log.warning("%s not vacuumed after a large write", table, exc_info=True)


#: `Session.info`'s key of the rows written per table since its last vacuum, for
#: `vacuum_after_commit`.
_TO_VACUUM = "lineups.to_vacuum"


def analyze_unless_busy(session: Session, table: str) -> bool:
    """PostgreSQL's ANALYZE of `table` (a table, or some of its columns: "merged_rows
    (view_id)") in a savepoint, waiting at most `ANALYZE_LOCK_WAIT_MS` for another
    transaction's ANALYZE of it, which holds its lock to its commit (a large ingest of
    another feed, whose upkeep may take minutes): neither a write nor a read is failed
    by its statement timeout for statistics, which that other ANALYZE is taking anyway.
    False, having changed nothing, when the lock was not free in time."""
    before = session.execute(text("SELECT current_setting('lock_timeout')")).scalar_one()
    try:
        with session.begin_nested():
            session.execute(text("SELECT set_config('lock_timeout', :wait, true)"), {"wait": f"{ANALYZE_LOCK_WAIT_MS}ms"})
            session.execute(text(f"ANALYZE {table}"))
            session.execute(text("SELECT set_config('lock_timeout', :before, true)"), {"before": before})
    except sa_exc.OperationalError as error:
        if getattr(error.orig, "sqlstate", None) != LOCK_NOT_AVAILABLE:
            raise
        log.info("%s not analysed: another transaction is analysing it", table)
        return False
    return True


def counted_rows(session: Session, table: str) -> float | None:
    """The rows of `table` that the planner's statistics count; None when it has none."""
    if session.connection().dialect.name == "postgresql":
        return _reltuples(session, table)
    try:
        stat = session.execute(text("SELECT stat FROM sqlite_stat1 WHERE tbl = :t LIMIT 1"), {"t": table}).scalar()
    except sa_exc.OperationalError:  # no ANALYZE ever ran: no sqlite_stat1 table
        return None
    return float(stat.split()[0]) if stat else None


def _reltuples(executor: Session | Connection, table: str) -> float | None:
    """PostgreSQL's count of `table`'s rows in its statistics; None when it has none."""
    known = executor.execute(text("SELECT reltuples FROM pg_class WHERE oid = to_regclass(:t)"), {"t": table}).scalar()
    return known if known is not None and known >= 0 else None


#: A write of at least this share of a table's rows makes its statistics stale.
STALE_SHARE = 0.1
#: How long a write's ANALYZE waits for another's lock of the table (PostgreSQL).
ANALYZE_LOCK_WAIT_MS = 200
#: PostgreSQL's SQLSTATE of a lock wait past `lock_timeout`.
LOCK_NOT_AVAILABLE = "55P03"


@contextmanager
def _sqlite_setting(session: Session, pragma: str, value: int) -> Iterator[None]:
    """On SQLite, the connection's `pragma` at `value` for the block, and back to what
    it was after; nothing elsewhere.

    Set back on the DBAPI connection itself, which SQLite allows whatever state its
    transaction is in: through the session, a block that failed (a build that found
    the store locked) could not set it back, and the pooled connection kept `value`
    for every later user (issue 49 item 3: a busy timeout of 0, so every write of the
    process on it failed at once while another process wrote)."""
    connection = session.connection()
    if connection.dialect.name != "sqlite":
        yield
        return
    raw = connection.connection.driver_connection
    before = int(raw.execute(f"PRAGMA {pragma}").fetchone()[0])
    raw.execute(f"PRAGMA {pragma} = {value}")
    try:
        yield
    finally:
        try:
            raw.execute(f"PRAGMA {pragma} = {before}")
        except sqlite3.Error:  # the connection itself failed: not one to hand to anyone else
            log.warning("%s not restored: the connection is discarded", pragma, exc_info=True)
            connection.invalidate()


@contextmanager
def transaction(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A session that commits when the block succeeds and rolls back when it raises."""
    with factory() as session:
        with session.begin():
            yield session
