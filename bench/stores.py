"""The stores the benchmarks run against, their buyers and their questions.

`build_store` writes `records` records in 20 feeds over the demo's real ports, each
vessel call reported by about 5 feeds (issue 3: 1,000,000 records, ~200,000 calls),
with the demo's jitter, spelling variants, blanks and disagreements, through the same
validation and upsert as a feed file, into SQLite or a PostgreSQL schema
(`fresh_schema`, on `own_server` if wanted). `add_buyers` adds buyers on subsets of the
feeds with their views, `questions` draws their distinct first pages, `changes` makes a
daily update's batch, `build_demo` a store of `lineups demo`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import os
import random
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Iterator
from urllib.parse import urlencode

import numpy as np
import pandas as pd
from sqlalchemy import Engine, func, select, text
from sqlalchemy.orm import Session, sessionmaker

from bench.processes import Process, free_port, lineups, serve
from store.access import accounts
from store.database.db import create_schema, make_engine, make_sessionmaker, transaction
from store.database.schema import Feed, MergedRow, MergedView, Record
from store.intake import demo, feeds, ingest, validate
from store.reference.ports import default_directory
from store.reference.taxonomy import default_taxonomy
from store.views import builds

ANCHOR = dt.date(2026, 11, 23)
SEED = 7
FEEDS = 20
#: Share of the calls at its ports that each feed reports: 20 feeds × 0.25 = 5 a call.
SHARE = 0.25
BUYER = "Bench Buyer"
#: The mixed workload's buyers, and the seed of their feeds and questions.
BUYERS = 7
BUYERS_SEED = 15
#: Requests per key per minute of the bench's servers: no request of a load is refused.
RATE_LIMIT = 1_000_000_000


@dataclasses.dataclass(frozen=True)
class Dataset:
    """A built bench store and how to reach it."""

    db_url: str
    buyer_id: str
    buyer_name: str
    api_key: str
    records: int
    feed_ids: tuple[str, ...]
    #: The PostgreSQL schema (search path) of the store; None on SQLite.
    db_schema: str | None = None

    @property
    def is_sqlite(self) -> bool:
        return self.db_url.startswith("sqlite")

    def engine(self) -> Engine:
        return make_engine(self.db_url, schema=self.db_schema)

    def sessions(self) -> sessionmaker[Session]:
        return make_sessionmaker(self.engine())


@contextlib.contextmanager
def fresh_schema(pg_url: str, prefix: str = "bench_") -> Iterator[str]:
    """A new, empty schema of `pg_url` (named `prefix`…) for a bench store, dropped
    afterwards."""
    schema, admin = prefix + uuid.uuid4().hex[:12], make_engine(pg_url)
    with admin.begin() as connection:
        connection.execute(text(f"CREATE SCHEMA {schema}"))
    try:
        yield schema
    finally:
        with admin.begin() as connection:
            connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


def build_store(folder: Path, records: int, seed: int = SEED, db_url: str | None = None,
                db_schema: str | None = None) -> Dataset:
    """A store with `records` records in FEEDS feeds, every one subscribed (active) by
    the bench buyer, so that all records are visible: a SQLite file in `folder`, or
    (`db_url`, `db_schema`) an existing, empty PostgreSQL schema."""
    db_url = db_url or f"sqlite:///{folder / 'bench.db'}"
    engine = make_engine(db_url, schema=db_schema)
    create_schema(engine)
    sessions = make_sessionmaker(engine)
    ports = tuple(sorted({p for f in demo.DEMO_FEEDS for p in f.ports}))
    specs = [
        demo.DemoFeed(f"Bench Feed {i + 1:02d}", ports, "daily", "agency", (4.0, 4.0, 4.0), "active")
        for i in range(FEEDS)
    ]
    calls = demo.build_calls(seed, int(records / (FEEDS * SHARE) * 1.1) + 10, ANCHOR)
    frames = [demo.feed_rows(calls, i, seed, spec, SHARE) for i, spec in enumerate(specs)]
    counts = [min(len(f), records // FEEDS + (i < records % FEEDS)) for i, f in enumerate(frames)]
    feed_ids, total = [], 0
    with transaction(sessions) as session:
        buyer = accounts.add_buyer(session, BUYER)
        key, _ = accounts.create_key(session, buyer)
        for spec, frame, count in zip(specs, frames, counts):
            feed = feeds.add_feed(session, spec.name, list(spec.ports), spec.frequency, spec.feed_type, *spec.ratings)
            frame = frame.iloc[:count].assign(_line=np.arange(2, count + 2))
            total += ingest.upsert(session, feed, validate.validate_frame(frame, name=spec.name)).inserted
            accounts.set_subscription(session, buyer, feed, "active")
            feed_ids.append(feed.id)
        buyer_id = buyer.id
    engine.dispose()
    return Dataset(db_url, buyer_id, BUYER, key, total, tuple(feed_ids), db_schema)


def changes(session: Session, feed_id: str, count: int, round_: int) -> pd.DataFrame:
    """`count` records of the feed, validated as a feed file's: half revisions of stored
    records (a later ETA, a new quantity), half new calls; each `round_` a new batch."""
    rng = np.random.default_rng(1000 + round_)
    stored = pd.DataFrame(
        session.execute(
            select(
                Record.ref, Record.port_unlocode, Record.vessel_imo, Record.vessel_name, Record.commodity,
                Record.operation, Record.quantity, Record.quantity_unit, Record.eta, Record.etb, Record.etd,
                Record.shipper, Record.receiver, Record.charterer,
            ).where(Record.feed_id == feed_id)
        ).all()
    )
    picked = stored.iloc[rng.choice(len(stored), size=min(count, len(stored)), replace=False)].reset_index(drop=True)
    revised, added = picked.iloc[: count // 2].copy(), picked.iloc[count // 2:].copy()
    revised["quantity"] = (rng.integers(10, 90, len(revised)) * 1000).astype(float)
    batch = uuid.uuid4().hex[:8]  # new refs even in a store that saw this round before
    added["ref"] = [f"BENCH-{round_}-{batch}-{i}" for i in range(len(added))]
    shift = pd.to_timedelta(rng.integers(1, 48, count), unit="h")
    frame = pd.concat([revised, added], ignore_index=True)
    for column in ("eta", "etb", "etd"):
        frame[column] = (pd.to_datetime(frame[column], utc=True) + shift[: len(frame)]).dt.strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        )
    frame["quantity"] = frame["quantity"].map(lambda q: "" if pd.isna(q) else f"{q:.0f}")
    frame = frame.astype(object).where(frame.notna(), "").astype(str)
    frame["_line"] = np.arange(2, len(frame) + 2)
    return validate.validate_frame(frame, name="bench-changes.csv")


# ---------------------------------------------------------------- buyers and questions
@dataclasses.dataclass(frozen=True)
class Buyers:
    """The bench's buyers: name → (id, API key, subscribed feed ids)."""

    keys: dict[str, tuple[str, str, tuple[str, ...]]]


def add_buyers(dataset: Dataset, count: int = BUYERS, seed: int = BUYERS_SEED) -> tuple[Buyers, float, dict]:
    """`count` buyers on different subsets of the feeds (the dataset's buyer sees all),
    their views built as a subscription change builds them; returns them, the seconds
    the views took, and what the views hold (views, rows, bytes: `store_bytes`)."""
    rng = random.Random(seed)
    engine = dataset.engine()
    sessions = make_sessionmaker(engine)
    keys = {dataset.buyer_name: (dataset.buyer_id, dataset.api_key, dataset.feed_ids)}
    with transaction(sessions) as session:
        for i in range(count - 1):
            chosen = tuple(sorted(rng.sample(dataset.feed_ids, rng.randint(3, len(dataset.feed_ids) - 2))))
            buyer = accounts.add_buyer(session, f"Mixed Buyer {i + 1}")
            key, _ = accounts.create_key(session, buyer)
            for feed_id in chosen:
                accounts.set_subscription(session, buyer, session.get(Feed, feed_id), "active")
            keys[buyer.name] = (buyer.id, key, chosen)
    before = store_bytes(dataset)
    start = time.perf_counter()
    for buyer_id, _, _ in keys.values():
        builds.ensure_buyer(sessions, buyer_id)
    seconds = time.perf_counter() - start
    with transaction(sessions) as session:
        if dataset.is_sqlite:
            session.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
        rows = session.scalar(select(func.count()).select_from(MergedRow))
        views = session.scalar(select(func.count()).select_from(MergedView))
    engine.dispose()
    return Buyers(keys), seconds, {"views": views, "rows": rows, "bytes": store_bytes(dataset) - before}


def store_bytes(dataset: Dataset) -> int:
    """Bytes of the SQLite file and its WAL; on PostgreSQL, of the schema's tables with
    their indexes and TOAST."""
    if not dataset.is_sqlite:
        engine = dataset.engine()
        try:
            with engine.connect() as connection:
                return int(connection.scalar(text(
                    "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
                    " JOIN pg_namespace n ON n.oid = c.relnamespace"
                    " WHERE n.nspname = current_schema() AND c.relkind = 'r'")))
        finally:
            engine.dispose()
    db = Path(dataset.db_url.removeprefix("sqlite:///"))
    return sum(p.stat().st_size for p in (db, db.with_name(db.name + "-wal")) if p.exists())


def questions(buyers: Buyers, count: int, seed: int = BUYERS_SEED) -> list[tuple[str, str, dict]]:
    """`count` distinct (buyer name, API key, query parameters) first-page questions:
    random port / country / commodity (leaf, subgroup or group) / date windows /
    `latest` / `merge=by_source`, each buyer's own key."""
    rng = random.Random(seed)
    taxonomy = default_taxonomy()
    ports = sorted({p for f in demo.DEMO_FEEDS for p in f.ports})
    directory = {p: default_directory().get(p).country_name for p in ports}
    commodities = [*taxonomy.groups(), *taxonomy.subgroups(), *sorted({leaf.name for leaf in taxonomy.leaves})]
    seen, out = set(), []
    names = sorted(buyers.keys)
    while len(out) < count:
        params: dict[str, str] = {}
        pick = rng.random
        if pick() < 0.45:
            params["port"] = rng.choice(ports)
        elif pick() < 0.3:
            params["country"] = directory[rng.choice(ports)]
        if pick() < 0.5:
            params["commodity"] = rng.choice(commodities)
        if pick() < 0.5:
            start = ANCHOR.toordinal() + rng.randint(-20, 40)
            params["from"] = dt.date.fromordinal(start).isoformat()
            if pick() < 0.7:
                params["to"] = dt.date.fromordinal(start + rng.randint(0, 30)).isoformat()
        if pick() < 0.3:
            params["latest"] = "true"
        if pick() < 0.3:
            params["merge"] = "by_source"
        params["limit"] = str(rng.choice((50, 100)))
        name = rng.choice(names)
        marker = (name, tuple(sorted(params.items())))
        if marker not in seen:
            seen.add(marker)
            out.append((name, buyers.keys[name][1], params))
    return out


def path_of(params: dict) -> str:
    return "/v1/lineups?" + urlencode(params)


# ---------------------------------------------------------------- serving a store
def store_env(dataset: Dataset) -> dict[str, str]:
    """The environment that points a `lineups` command at the dataset's store (on
    PostgreSQL with the signing secret a store other than SQLite requires)."""
    if dataset.is_sqlite:
        return {"LINEUPS_DB": dataset.db_url}
    return {"LINEUPS_DB": dataset.db_url, "LINEUPS_DB_SCHEMA": dataset.db_schema or "",
            "LINEUPS_SECRET": f"bench-mixed-{dataset.db_schema}-{dataset.buyer_id}"}


def start_server(dataset: Dataset, folder: Path, name: str = "serve", *options: str, explorers: int = 0,
                 **env: str) -> Process:
    """A fresh `lineups serve` of the store (`processes.serve`: its log NAME.log,
    `options` such as "--processes", "2", `env` added), with a rate limit no load meets."""
    return serve(folder, name, {"LINEUPS_RATE_LIMIT": str(RATE_LIMIT), **store_env(dataset), **env}, *options,
                 explorers=explorers)


def build_demo(folder: Path, records: int) -> tuple[dict[str, str], dict]:
    """The environment (`LINEUPS_DB`, `LINEUPS_SECRET`) of a new SQLite store in `folder`
    with the demo data set and its buyer's views (`lineups demo`), and what the command
    printed (the buyer's id and API key, …)."""
    env = {"LINEUPS_DB": f"sqlite:///{folder / 'demo.db'}", "LINEUPS_SECRET": uuid.uuid4().hex + uuid.uuid4().hex}
    return env, json.loads(lineups("demo", "--records", str(records), "--json", env=env))


# ---------------------------------------------------------------- a PostgreSQL of the run's own
def pg_settings(memory_bytes: int | None = None) -> dict[str, str]:
    """The server's settings for a machine of `memory_bytes` (docs/deploying.md, "Sizing
    PostgreSQL"): a quarter of memory for shared buffers (at most 8 GB), the planner told
    that three quarters may be cached, and costs for an SSD."""
    if memory_bytes is None:
        memory_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    gib = memory_bytes / 2**30
    return {"shared_buffers": f"{int(min(gib / 4, 8) * 1024)}MB", "effective_cache_size": f"{int(gib * 3 / 4 * 1024)}MB",
            "maintenance_work_mem": "512MB", "work_mem": "16MB", "max_wal_size": "4GB", "random_page_cost": "1.1"}


def describe_pg(memory_bytes: int | None = None) -> str:
    return ", ".join(f"{name} {value}" for name, value in pg_settings(memory_bytes).items())


def pg_binaries() -> Path:
    """Debian's folder of the newest PostgreSQL server's programs."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    if not found:
        raise RuntimeError("no PostgreSQL server programs under /usr/lib/postgresql (Debian's postgresql package)")
    return found[-1].parent


def _pg_run(command: list[str]) -> None:
    """A server program, as the `postgres` user when this is root (PostgreSQL refuses root)."""
    if os.geteuid() == 0:
        command = ["runuser", "-u", "postgres", "--", *command]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


@contextlib.contextmanager
def own_server(memory_bytes: int | None = None) -> Iterator[str]:
    """A new PostgreSQL cluster in a temporary folder on a free 127.0.0.1 port, with
    `pg_settings(memory_bytes)` and autovacuum on, for the length of the block (the
    machine's server runs Debian's defaults: 128 MB of shared buffers); yields the URL
    of its `bench` database, and removes it all afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="lineups-bench-pg-"))
    data, port, binaries = folder / "data", free_port(), pg_binaries()
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
    try:
        _pg_run([str(binaries / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"])
        conf = {"port": str(port), "listen_addresses": "'127.0.0.1'", "unix_socket_directories": f"'{folder}'",
                **{name: f"'{value}'" for name, value in pg_settings(memory_bytes).items()}}
        with open(data / "postgresql.conf", "a") as out:
            out.write("".join(f"{name} = {value}\n" for name, value in conf.items()))
        _pg_run([str(binaries / "pg_ctl"), "-D", str(data), "-l", str(folder / "server.log"), "-w", "start"])
        try:
            _pg_run([str(binaries / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "bench"])
            yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/bench"
        finally:
            _pg_run([str(binaries / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"])
    finally:
        shutil.rmtree(folder, ignore_errors=True)
