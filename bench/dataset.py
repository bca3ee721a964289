"""The store the service benchmarks run against: demo-like data at bench scale.

`build_store` writes a store of `records` records in 20 feeds over the demo's
real ports, shaped as issue 3 sizes the merge (each vessel call reported by about 5
feeds, so 1,000,000 records make about 200,000 calls), with the demo's ETA jitter,
spelling variants, blanks and counterparty disagreements (`store.intake.demo`), all visible
to one buyer, written through the same validation and upsert as a feed file: a SQLite file by
default, or the same store in a PostgreSQL schema (`db_url` and `db_schema`, the schema
made and dropped by the caller).
`changes` then makes a small batch for one feed, part revisions of stored records and
part new ones, the way a daily feed file does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import uuid
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd
from sqlalchemy import Engine, select, text
from sqlalchemy.orm import Session, sessionmaker

from store.access import accounts

from store.intake import demo, feeds, ingest, validate
from store.database.db import create_schema, make_engine, make_sessionmaker, transaction
from store.database.schema import Record

ANCHOR = dt.date(2026, 11, 23)
SEED = 7
FEEDS = 20
#: Share of the calls at its ports that each feed reports: 20 feeds × 0.25 = 5 a call.
SHARE = 0.25
BUYER = "Bench Buyer"


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
    """`count` records of the feed, validated as a feed file's: half revisions of
    stored records (ETA a few hours later, a new quantity), half new calls of the same
    vessels. `round_` makes each batch different."""
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
