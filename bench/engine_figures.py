"""Figures measured in the benchmark's own process: ingest, the cold merge, and the
query after an ingest (incremental re-merge), each next to its same-run reference.

Ingest and the cold merge reuse `bench/ingest_bench.py` and `bench/merge_bench.py`.
"""

from __future__ import annotations

import gc
import statistics
import time

import ingest_bench
import merge_bench
import pandas as pd
from dataset import Dataset, ingest_changes
from figures import Figure, Target, missing

from store import merge
from store import query as pipeline
from store.db import transaction
from store.lineups import LineupService
from store.query import LineupQuery

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


def incremental_figures(dataset: Dataset, runs: int, changes: int) -> tuple[list[Figure], LineupService]:
    """The first query of a fresh service over the store (load + merge), then, `runs`
    times, a `changes`-record ingest into one feed and the next query (re-merge of the
    touched keys, sort, first page), against a full merge of the same records. Returns
    the figures and the warm service (for the export reference)."""
    sessions = dataset.sessions()
    service = LineupService()
    query = LineupQuery()
    start = time.perf_counter()
    with sessions() as session:
        selection = service.select(session, dataset.buyer_id, query)
    first = time.perf_counter() - start
    rows = len(selection)
    nexts, remerges, fulls, equal = [], [], [], True
    for round_ in range(runs):
        with transaction(sessions) as session:
            ingest_changes(session, dataset.feed_ids[round_ % len(dataset.feed_ids)], changes, round_)
        with sessions() as session:
            start = time.perf_counter()
            feeds = service.feeds_for(session, dataset.buyer_id, None)
            merged = service.merged(session, feeds, "all")
            remerges.append(time.perf_counter() - start)
            selection = service.select(session, dataset.buyer_id, query)
            pipeline.page(selection.rows, None, 100, selection.sort_keys)
            nexts.append(time.perf_counter() - start)
            records = service.records(session, feeds)
        gc.collect()
        start = time.perf_counter()
        full = merge.merge(records, "all")
        fulls.append(time.perf_counter() - start)
        equal &= set(full["id"]) == set(merged["id"]) and len(full) == len(merged)
        del full, records
    sessions.kw["bind"].dispose()
    full_median = statistics.median(fulls)
    reference = ("full re-merge of all visible records (what the next query paid before)", full_median)
    note = (
        f"of which re-merge of the touched keys: median {statistics.median(remerges) * 1000:.0f} ms; "
        f"incremental result {'equals' if equal else 'DIFFERS FROM'} the full merge"
    )
    return [
        Figure("merge.first_query", "Merge", f"first query of a fresh server process: load {dataset.records:,} "
               f"records from SQLite and merge ({rows:,} rows)", "s", [first]),
        Figure("merge.incremental", "Merge", f"next query after a {changes:,}-record ingest into the "
               f"{dataset.records:,}-record store", "s", nexts, Target("<=", full_median, "less than a full re-merge"),
               reference, note),
    ], service


def render_reference(service: LineupService, dataset: Dataset, runs: int) -> tuple[int, float]:
    """(rows, median rows/s) of the CSV renderer alone over the whole result, in this
    process: the export's reference without HTTP."""
    from api import render

    sessions = dataset.sessions()
    with sessions() as session:
        rows = service.select(session, dataset.buyer_id, LineupQuery()).rows
    sessions.kw["bind"].dispose()
    rates = []
    for _ in range(runs):
        start = time.perf_counter()
        for _chunk in render.csv_chunks(rows):
            pass
        rates.append(len(rows) / (time.perf_counter() - start))
    return len(rows), statistics.median(rates)


def share_query(service: LineupService, dataset: Dataset, target_rows: int) -> tuple[LineupQuery, int]:
    """A query whose result has close to (at most) `target_rows` rows: the first days
    of the lineup (`from`/`to`), and its row count."""
    sessions = dataset.sessions()
    with sessions() as session:
        rows = service.select(session, dataset.buyer_id, LineupQuery()).rows
        days = pd.to_datetime(rows["combined_date"].dropna()).dt.date.unique()
        best = (LineupQuery(date_from=days[0], date_to=days[0]), 0)
        low, high = 0, len(days) - 1
        while low <= high:  # the most days whose result stays within the target
            middle = (low + high) // 2
            query = LineupQuery(date_from=days[0], date_to=days[middle])
            count = len(service.select(session, dataset.buyer_id, query))
            if count <= target_rows:
                best, low = (query, count), middle + 1
            else:
                high = middle - 1
    sessions.kw["bind"].dispose()
    return best
