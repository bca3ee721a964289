"""The whole bench (issue 8) in one run on one store: the ingest, merge, mixed and
explorer workloads' figures, and the share-link exports, which only this run measures.

    python -m bench full [--quick] [--records N] [--runs R] [--pg URL]

On a store of `--records` records (default 1,000,000; `--quick`: 20,000, a hundred
questions and no Datasette or browser, a few minutes, which the test suite runs so that
the code never rots): `ingest`, `merge` and `mixed` as those workloads measure them;
CSV exports through share links (the whole store, and ~100,000 rows) beside the CSV
writer alone in process, with the server's memory while it streams; and the explorer
at this store size (`explorer`; not in `--quick`).
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

import pandas as pd
import requests

from bench.explorer import explorer_figures
from bench.figures import Figure, Run, Target, command, missing, stage
from bench.ingest import ingest_figures
from bench.merge import merge_figures
from bench.mixed import mixed_figures
from bench.processes import Process, RssSampler, lineups
from bench.stores import Dataset, build_store, start_server
from store.views.csvtext import csv_of_columns
from store.views.lineups import Lineups
from store.query import LineupQuery
from store.views.stored import arrow_columns

DEFAULT_PG = os.environ.get("LINEUPS_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


# ---------------------------------------------------------------- exports
def render_reference(dataset: Dataset, runs: int) -> tuple[int, float]:
    """(rows, median rows/s) of the CSV writer alone over the whole result, its blocks read
    from the kept view once, in this process: the export's reference without HTTP or reads."""
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
    """The first days of the lineup (`from`/`to`) whose result has at most `target_rows` rows."""
    sessions = dataset.sessions()
    view = Lineups(sessions)
    rows = view.frame(dataset.buyer_id, LineupQuery())
    days = pd.to_datetime(rows["combined_date"].dropna()).dt.date.unique()
    best = (LineupQuery(date_from=days[0], date_to=days[0]), 0)
    low, high = 0, len(days) - 1
    while low <= high:
        middle = (low + high) // 2
        query = LineupQuery(date_from=days[0], date_to=days[middle])
        count = view.count(dataset.buyer_id, query)
        if count <= target_rows:
            best, low = (query, count), middle + 1
        else:
            high = middle - 1
    sessions.kw["bind"].dispose()
    return best


def create_link(dataset: Dataset, server: Process, query: LineupQuery) -> str:
    """A new share link of the bench buyer for `query`, as an operator makes one."""
    out = lineups("link", "create", dataset.buyer_name, urlencode(query.to_params()), "--json", "--base-url",
                  server.base_url, env={"LINEUPS_DB": dataset.db_url}, timeout=120)
    return json.loads(out)["url"]


def export_figures(id: str, label: str, url: str, pid: int, runs: int, target: Target,
                   reference: tuple[str, float]) -> list[Figure]:
    """Rows/s of a share link's streamed CSV, and the server's RSS growth during it."""
    rates, growth, rows = [], [], 0
    for _ in range(runs):
        with RssSampler(pid) as memory:
            start, lines = time.perf_counter(), 0
            with requests.get(url, stream=True, timeout=600) as response:
                for chunk in response.iter_content(1 << 20):
                    lines += chunk.count(b"\n")
            seconds, rows = time.perf_counter() - start, max(lines - 1, 0)
        if response.status_code != 200:
            return [missing(id, "Exports", label, "rows/s", f"the share link answered {response.status_code}", target)]
        rates.append(rows / seconds)
        growth.append(memory.peak - memory.first)
    return [
        Figure(id, "Exports", f"{label} ({rows:,} rows)", "rows/s", rates, target, reference,
               f"first run {rates[0]:,.0f} rows/s, RSS +{growth[0]:.0f} MiB"),
        Figure(f"{id}.first", "Exports", f"{label}: first export of the result", "rows/s", rates[:1], target),
        Figure(f"{id}.memory", "Exports", f"{label}: server RSS growth while streaming", "MiB", growth,
               Target("<=", 128, "flat (≤ 128)")),
    ]


# ---------------------------------------------------------------- the run
def step(name: str, function, *args, **kwargs):
    with stage("bench", name):
        return function(*args, **kwargs)


def exports(dataset: Dataset, folder: Path, runs: int) -> list[Figure]:
    """The whole store and ~100,000 rows through share links, beside the CSV writer alone."""
    _, render_rate = step("CSV writer alone", render_reference, dataset, runs)
    share_rows = min(100_000, dataset.records // 10)
    query, _ = step("choosing the share link", share_query, dataset, share_rows)
    reference = ("CSV writer alone, in process", render_rate)
    figures = []
    # A share-link ceiling above the whole result, so that one link exports it all; every
    # explorer built first, so that no build meets the memory figure.
    with start_server(dataset, folder, explorers=1,
                      LINEUPS_SHARE_CEILING=str(max(dataset.records * 2, 100_000))) as server:
        for id, label, link_query, target in (
                ("export.whole", "CSV export of the whole store through a share link", LineupQuery(), 300_000),
                ("export.share", f"share link of ~{share_rows:,} rows (`from`/`to` of the first days)", query, 200_000)):
            url = step(f"share link ({id})", create_link, dataset, server, link_query)
            figures += step(id, export_figures, id, label, url, server.pid, runs, Target(">=", target), reference)
    return figures


def measure(args, folder: Path) -> list[Figure]:
    records, runs, quick = args.records, args.runs, args.quick
    figures = step("ingest", ingest_figures, records, runs, args.pg or None)
    figures += step("cold merge", merge_figures, records, runs)
    dataset = step("building the service store", build_store, folder, records)
    figures = step("mixed workload", mixed_figures, dataset, folder, 100 if quick else 1_500, not quick,
                   2_000 if quick else 100_000, daily_runs=runs) + figures
    figures += exports(dataset, folder, runs)
    if not quick:
        figures += step("explorer in Chromium", explorer_figures, records, folder)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = command("full", __doc__)
    parser.add_argument("--quick", action="store_true", help="about 20,000 records and short loads (a few minutes)")
    parser.add_argument("--records", type=int, default=None, help="store size (default 1,000,000; quick 20,000)")
    parser.add_argument("--runs", type=int, default=3, help="repetitions of each figure (default 3)")
    parser.add_argument("--pg", default=DEFAULT_PG, help="PostgreSQL URL for the ingest figure ('' to skip)")
    args = parser.parse_args(argv)
    args.records = args.records or (20_000 if args.quick else 1_000_000)
    run = Run("full", args.results, argv)
    with tempfile.TemporaryDirectory(prefix="lineups-bench-") as tmp:
        figures = measure(args, Path(tmp))
    run.save(figures, args.records, mode="-quick" if args.quick else "")
    return 0
