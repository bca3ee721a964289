"""Figures measured in the benchmark's own process: ingest and the cold merge, each
next to its same-run reference, and the references of the export figures.

Ingest and the cold merge reuse `bench/ingest_bench.py` and `bench/merge_bench.py`.
"""

from __future__ import annotations

import gc
import statistics
import time

import ingest_bench
import merge_bench
import pandas as pd
from dataset import Dataset
from figures import Figure, Target, missing

from store.merging import merge
from store.views.query import LineupQuery
from store.views.csvtext import csv_of_columns
from store.views.lineups import Lineups
from store.views.stored import arrow_columns

MIB = 2**20


def ingest_figures(records: int, runs: int, pg_url: str | None) -> list[Figure]:
    """Rows/s of a `records`-row CSV into SQLite (reference: bare executemany) and
    into PostgreSQL when it answers."""
    result = ingest_bench.measure(records, runs, pg_url)
    rows = result["rows"]

    def rates(times: list[float]) -> list[float]:
        return [rows / t for t in times]

    bare = rates(result["bare_sqlite"]["times"])
    label = f"{rows:,}-row CSV, validated and upserted"
    figures = [
        Figure(
            "ingest.sqlite", "Ingest", f"{label} into SQLite", "rows/s", rates(result["sqlite"]["times"]),
            Target(">=", 50_000), ("bare sqlite3 executemany, no validation", statistics.median(bare)),
        )
    ]
    if result.get("postgresql"):
        figures.append(
            Figure("ingest.postgresql", "Ingest", f"{label} into PostgreSQL", "rows/s",
                   rates(result["postgresql"]["times"]))
        )
    else:
        figures.append(missing("ingest.postgresql", "Ingest", f"{label} into PostgreSQL", "rows/s",
                               "PostgreSQL did not answer" if pg_url else "no PostgreSQL URL given"))
    return figures


def merge_figures(records: int, runs: int) -> list[Figure]:
    """The cold merge of `records` synthetic records (20 feeds, ~5 records a call)
    against the straightforward pandas merge, and the engine's peak memory."""
    frame = merge_bench.make_records(records)
    engine_times, rows = merge_bench.timed(merge.merge, frame, runs)
    groups = len(rows)
    del rows
    base_times, _ = merge_bench.timed(merge_bench.baseline_merge, frame, runs)
    peaks = [merge_bench.peak_traced(merge.merge, frame) / MIB for _ in range(max(1, runs // 2))]
    del frame
    gc.collect()
    return [
        Figure(
            "merge.cold", "Merge", f"cold merge of {records:,} visible records ({groups:,} rows)", "s",
            engine_times, Target("<=", 1.0),
            ("straightforward pandas merge (sort, diff/cumsum, groupby-last)", statistics.median(base_times)),
        ),
        Figure("merge.memory", "Merge", "cold merge: peak memory allocated (tracemalloc)", "MiB", peaks,
               Target("<=", 1.5 * 1024)),
    ]


def render_reference(dataset: Dataset, runs: int) -> tuple[int, float]:
    """(rows, median rows/s) of the CSV writer alone over the whole result (its
    blocks read from the kept view once, as share links read them), in this
    process: the export's reference without HTTP or reads. (Until 2026-11-29 it
    timed the writer of a pandas frame, which exports no longer used.)"""
    sessions = dataset.sessions()
    blocks = [page.records for page in Lineups(sessions).pages(dataset.buyer_id, LineupQuery())]
    sessions.kw["bind"].dispose()
    rows = sum(len(block) for block in blocks)
    rates = []
    for _ in range(runs):
        start = time.perf_counter()
        for block in blocks:
            csv_of_columns(arrow_columns(block))
        rates.append(rows / (time.perf_counter() - start))
    return rows, statistics.median(rates)


def share_query(dataset: Dataset, target_rows: int) -> tuple[LineupQuery, int]:
    """A query whose result has close to (at most) `target_rows` rows: the first days
    of the lineup (`from`/`to`), and its row count."""
    sessions = dataset.sessions()
    lineups = Lineups(sessions)
    rows = lineups.frame(dataset.buyer_id, LineupQuery())
    days = pd.to_datetime(rows["combined_date"].dropna()).dt.date.unique()
    best = (LineupQuery(date_from=days[0], date_to=days[0]), 0)
    low, high = 0, len(days) - 1
    while low <= high:  # the most days whose result stays within the target
        middle = (low + high) // 2
        query = LineupQuery(date_from=days[0], date_to=days[middle])
        count = lineups.count(dataset.buyer_id, query)
        if count <= target_rows:
            best, low = (query, count), middle + 1
        else:
            high = middle - 1
    sessions.kw["bind"].dispose()
    return best
