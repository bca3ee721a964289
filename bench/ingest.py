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

import argparse
import datetime as dt
import sqlite3
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import pandas as pd
from sqlalchemy import text

from bench.figures import RESULTS, Figure, Target, machine, missing, now, print_figures, save
from store.database.db import create_schema, make_engine, make_sessionmaker, transaction
from store.intake import demo, feeds, ingest

ANCHOR = dt.date(2026, 11, 23)


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


def measure(records: int, runs: int, pg_url: str | None) -> dict:
    """Median/min/max rows per second for each target; PostgreSQL when it answers."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = folder / "feed.csv"
        rows = write_feed_file(path, records)
        results = {"rows": rows}
        sqlite_times, bare_times = [], []
        for i in range(runs):  # alternated, so that both see the same load on the machine
            sqlite_times.append(ingest_once(f"sqlite:///{folder / f'run{i}.db'}", path))
            bare_times.append(bare_sqlite_once(path, folder))
        results["sqlite"] = _rates(rows, sqlite_times)
        results["bare_sqlite"] = _rates(rows, bare_times)
        if pg_url:
            results["postgresql"] = _pg(pg_url, path, rows, runs)
    return results


def _pg(pg_url: str, path: Path, rows: int, runs: int) -> dict | None:
    try:
        admin = make_engine(pg_url)
        with admin.connect():
            pass
    except Exception:  # noqa: BLE001 - PostgreSQL is optional for this figure
        return None
    times = []
    for _ in range(runs):
        schema = "bench_" + uuid.uuid4().hex[:10]
        with admin.begin() as connection:
            connection.execute(text(f"CREATE SCHEMA {schema}"))
        try:
            times.append(ingest_once(pg_url, path, schema))
        finally:
            with admin.begin() as connection:
                connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))
    admin.dispose()
    return _rates(rows, times)


def _rates(rows: int, times: list[float]) -> dict:
    rates = [rows / t for t in times]
    return {
        "median": statistics.median(rates),
        "min": min(rates),
        "max": max(rates),
        "seconds": statistics.median(times),
        "times": times,
    }


def ingest_figures(records: int, runs: int, pg_url: str | None) -> list[Figure]:
    """Rows/s of a `records`-row CSV into SQLite (reference: bare executemany) and into
    PostgreSQL when it answers."""
    result = measure(records, runs, pg_url)
    rows = result["rows"]
    label = f"{rows:,}-row CSV, validated and upserted"
    bare = [rows / t for t in result["bare_sqlite"]["times"]]
    figures = [Figure("ingest.sqlite", "Ingest", f"{label} into SQLite", "rows/s",
                      [rows / t for t in result["sqlite"]["times"]], Target(">=", 50_000),
                      ("bare sqlite3 executemany, no validation", statistics.median(bare)))]
    if result.get("postgresql"):
        figures.append(Figure("ingest.postgresql", "Ingest", f"{label} into PostgreSQL", "rows/s",
                              [rows / t for t in result["postgresql"]["times"]]))
    else:
        figures.append(missing("ingest.postgresql", "Ingest", f"{label} into PostgreSQL", "rows/s",
                               "PostgreSQL did not answer" if pg_url else "no PostgreSQL URL given"))
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench ingest", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pg", default=None, help="PostgreSQL URL (optional)")
    parser.add_argument("--results", type=Path, default=RESULTS, help="where the result file goes")
    args = parser.parse_args(argv)
    measured, where = now(), machine()
    figures = ingest_figures(args.records, args.runs, args.pg)
    print_figures(figures)
    save("ingest", figures, measured=measured, where=where, store="sqlite", records=args.records,
         argv=argv, folder=args.results)
    return 0
