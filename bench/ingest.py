"""How fast `lineups ingest` loads a large feed file (contract C11: ≥ 50,000 rows/s into
SQLite on a 1,000,000-row file).

    python -m bench ingest [--records N] [--runs 3] [--pg URL]

Writes a deterministic feed file shaped like the demo feeds (real ports, valid IMO
numbers, blanks, spelling variants), then times validation + upsert of the whole file
into a fresh SQLite store, and into a fresh PostgreSQL schema when one answers. The
reference in the same run is the floor of the work: the same rows written with a bare
`sqlite3` executemany, no validation, alternated with the ingest runs.
"""

from __future__ import annotations

import sqlite3
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import pandas as pd

from bench.figures import Figure, Run, Target, command, missing
from bench.stores import ANCHOR, fresh_schema
from store.database.db import create_schema, make_engine, make_sessionmaker, transaction
from store.intake import demo, feeds, ingest


def write_feed_file(path: Path, records: int, seed: int = 11) -> int:
    """A feed CSV of `records` rows; returns the row count."""
    # The demo feeds report ~0.6 records per call: make enough calls for `records`,
    # more if a first guess falls short.
    wanted = int(records / 0.6) + 10
    while True:
        calls = demo.build_calls(seed, wanted, ANCHOR)
        frames = [demo.feed_rows(calls, i, seed) for i in range(len(demo.DEMO_FEEDS))]
        frame = pd.concat(frames, ignore_index=True)
        if len(frame) >= records:
            break
        wanted = int(wanted * records / max(len(frame), 1) * 1.05) + 10
    frame = frame.iloc[:records]
    frame["ref"] = [f"R{i:08d}" for i in range(len(frame))]
    frame.to_csv(path, index=False)
    return len(frame)


def ingest_once(db_url: str, path: Path, schema: str | None = None) -> float:
    """Seconds to validate and upsert the file into a fresh store."""
    engine = make_engine(db_url, schema=schema)
    create_schema(engine)
    sessions = make_sessionmaker(engine)
    with transaction(sessions) as session:
        feed = feeds.add_feed(session, f"Bench {uuid.uuid4().hex[:6]}", ["BRSSZ"])
    start = time.perf_counter()
    with transaction(sessions) as session:
        report = ingest.ingest_file(session, session.merge(feed), path)
    elapsed = time.perf_counter() - start
    engine.dispose()
    assert report.inserted > 0
    return elapsed


def bare_sqlite_once(path: Path, folder: Path) -> float:
    """Seconds for the floor: read the CSV and executemany it into SQLite, no checks."""
    start = time.perf_counter()
    # Object columns, as ingest reads them: with pyarrow installed, pandas 3 reads
    # `dtype=str` into Arrow strings, whose row iteration triples this floor.
    frame = pd.read_csv(path, dtype=object, keep_default_na=False)
    connection = sqlite3.connect(folder / f"bare-{uuid.uuid4().hex}.db")
    columns = list(frame.columns)
    connection.execute(f"CREATE TABLE t ({', '.join(columns)})")
    connection.executemany(
        f"INSERT INTO t VALUES ({', '.join('?' * len(columns))})", frame.itertuples(index=False, name=None)
    )
    connection.commit()
    connection.close()
    return time.perf_counter() - start


def _pg_times(pg_url: str, path: Path, runs: int) -> list[float] | None:
    """Seconds of `runs` ingests of the file, each into a fresh schema; None when
    PostgreSQL does not answer (the figure is optional)."""
    engine = make_engine(pg_url)
    try:
        engine.connect().close()
    except Exception:  # noqa: BLE001 - any failure to connect
        return None
    finally:
        engine.dispose()
    times = []
    for _ in range(runs):
        with fresh_schema(pg_url) as schema:
            times.append(ingest_once(pg_url, path, schema))
    return times


def ingest_figures(records: int, runs: int, pg_url: str | None) -> list[Figure]:
    """Rows/s of a `records`-row CSV into SQLite (reference: bare executemany, runs
    alternated so that both see the same machine) and into PostgreSQL when it answers."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = folder / "feed.csv"
        rows = write_feed_file(path, records)
        ours, bare = [], []
        for i in range(runs):
            ours.append(rows / ingest_once(f"sqlite:///{folder / f'run{i}.db'}", path))
            bare.append(rows / bare_sqlite_once(path, folder))
        pg_times = _pg_times(pg_url, path, runs) if pg_url else None
    label = f"{rows:,}-row CSV, validated and upserted"
    figures = [Figure("ingest.sqlite", "Ingest", f"{label} into SQLite", "rows/s", ours, Target(">=", 50_000),
                      ("bare sqlite3 executemany, no validation", statistics.median(bare)))]
    if pg_times:
        figures.append(Figure("ingest.postgresql", "Ingest", f"{label} into PostgreSQL", "rows/s", [rows / t for t in pg_times]))
    else:
        figures.append(missing("ingest.postgresql", "Ingest", f"{label} into PostgreSQL", "rows/s",
                               "PostgreSQL did not answer" if pg_url else "no PostgreSQL URL given"))
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = command("ingest", __doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pg", default=None, help="PostgreSQL URL (optional)")
    args = parser.parse_args(argv)
    run = Run("ingest", args.results, argv)
    run.save(ingest_figures(args.records, args.runs, args.pg), args.records)
    return 0
