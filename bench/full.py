"""The whole bench (issue 8): every figure against its target, ceiling or baseline, in
one run on one store.

    python -m bench full [--quick] [--records N] [--runs R] [--seconds S] [--pg URL]

On a store of `--records` records (default 1,000,000; `--quick`: 20,000 and short
loads, a few minutes, which the test suite runs so that the code never rots):

1. ingest rows/s of a CSV into SQLite (and PostgreSQL when it answers), beside a bare
   executemany (`bench/ingest.py`);
2. the cold merge against a straightforward pandas merge, and its peak memory
   (`bench/merge.py`): what building a view costs;
3. the headline, the mixed workload (`bench/mixed.py`), beside Datasette;
4. one buyer walking the pages of one query under 32 connections, against a bare
   Tornado handler answering a body of the same size (`bench/ceiling.py`), measured
   alternately; the server's memory after each run;
5. the round trip of one warm page on one connection, against the same ceiling;
6. CSV exports through share links (the whole store, and ~100,000 rows) beside the CSV
   writer alone in process, with the server's memory while it streams;
7. the explorer in headless Chromium on the demo data (`tests/explorer/test_browser.py`
   run `--runs` times; not in `--quick`, whose run the test suite makes anyway).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

import pandas as pd
import requests

from bench.figures import RESULTS, Figure, Target, machine, missing, now, print_figures, save, say, stage
from bench.ingest import ingest_figures
from bench.load import LoadResult, measure_load
from bench.merge import merge_figures
from bench.mixed import mixed_figures
from bench.processes import EXPLORER_READY, Process, RssSampler, free_port, lineups_command, rss_mib
from bench.stores import RATE_LIMIT, Dataset, build_store
from store.views.csvtext import csv_of_columns
from store.views.lineups import Lineups
from store.views.query import LineupQuery
from store.views.stored import arrow_columns

DEFAULT_PG = os.environ.get("LINEUPS_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
PAGE_ROWS = 100
REPO = Path(__file__).resolve().parents[1]
BROWSER_TEST = "tests/explorer/test_browser.py::test_the_explorer_flow"
CHROMIUM = Path("/usr/bin/chromium")


# ---------------------------------------------------------------- the service and its ceiling
def start_service(dataset: Dataset, folder: Path) -> Process:
    """`lineups serve` over the bench store, answering, its explorer built; a share-link
    ceiling above the whole result, so that one link can export it all."""
    port = free_port()
    env = {"LINEUPS_RATE_LIMIT": str(RATE_LIMIT), "LINEUPS_SHARE_CEILING": str(max(dataset.records * 2, 100_000)),
           "LINEUPS_BASE_URL": f"http://127.0.0.1:{port}"}
    command = [*lineups_command(), "serve", "--db", dataset.db_url, "--host", "127.0.0.1", "--port", str(port)]
    return Process(command, port, folder / "serve.log", env).start("/healthz").wait_for_log(EXPLORER_READY)


def start_ceiling(body: bytes, folder: Path) -> Process:
    """The ceiling (`bench/ceiling.py`) on a free 127.0.0.1 port, answering `body`."""
    body_file = folder / "ceiling-body.json"
    body_file.write_bytes(body)
    port = free_port()
    return Process([sys.executable, "-m", "bench.ceiling", str(port), str(body_file)], port, folder / "ceiling.log",
                   {"PYTHONPATH": str(REPO)}).start("/")


@dataclasses.dataclass
class Warm:
    """The warmed service: the page paths the load walks, a page body, the rate limit seen."""

    paths: list[str]
    body: bytes
    rate_limit: int | None


def warm_pages(server: Process, api_key: str, pages: int) -> Warm:
    """Walk `pages` pages of /v1/lineups, keeping each page's path, so that the load
    requests warm, cursored pages."""
    http = requests.Session()
    http.headers["X-API-Key"] = api_key
    path = f"/v1/lineups?limit={PAGE_ROWS}"
    paths, body, limit = [], b"", None
    for number in range(pages):
        response = http.get(server.base_url + path, timeout=600)
        response.raise_for_status()
        if number == 0:
            body, limit = response.content, response.headers.get("X-RateLimit-Limit")
        paths.append(path)
        cursor = response.json()["next_cursor"]
        if cursor is None:
            break
        path = f"/v1/lineups?{urlencode({'limit': PAGE_ROWS, 'cursor': cursor})}"
    return Warm(paths, body, int(limit) if limit else None)


def alternate(server: Process, warm: Warm, api_key: str, folder: Path, runs: int, seconds: float, connections: int,
              bound: int) -> tuple[list[LoadResult], list[LoadResult], list[float]]:
    """Ceiling and service loaded alternately `runs` times (both see the same machine);
    the server's RSS after each run."""
    service, ceiling, rss = [], [], []
    with start_ceiling(warm.body, folder) as bare:
        for _ in range(runs):
            ceiling.append(measure_load(bare.base_url, ["/v1/lineups"], None, connections, seconds, bound))
            service.append(measure_load(server.base_url, warm.paths, api_key, connections, seconds, bound))
            rss.append(rss_mib(server.pid))
    return ceiling, service, rss


def api_figures(server: Process, api_key: str, warm: Warm, folder: Path, runs: int, seconds: float,
                connections: int) -> list[Figure]:
    """Requests/s, p50 and p99 of warm pages under `connections` connections, against the ceiling."""
    ceiling, service, rss = alternate(server, warm, api_key, folder, runs, seconds, connections, int(seconds * 20_000))
    top_rate = statistics.median(r.rate for r in ceiling)
    top_p50 = statistics.median(r.p50_ms for r in ceiling)
    top_p99 = statistics.median(r.p99_ms for r in ceiling)
    what = f"warm /v1/lineups pages of {PAGE_ROWS} rows ({len(warm.body):,} bytes), {connections} connections"
    bare = "bare Tornado handler, pre-serialised body of the same size"
    errors = sum(r.errors for r in service)
    note = f"{len(warm.paths)} distinct cursored pages, round robin" + (
        f"; {errors} error responses or socket errors (rate limit seen: {warm.rate_limit})" if errors else "")
    return [
        Figure("api.rate", "API page", what, "req/s", [r.rate for r in service],
               Target(">=", 0.5 * top_rate, f"≥ 50% of the ceiling ({0.5 * top_rate:,.0f})"), (bare, top_rate), note),
        Figure("api.p50", "API page", "p50 latency", "ms", [r.p50_ms for r in service], None, (bare, top_p50)),
        Figure("api.p99", "API page", "p99 latency", "ms", [r.p99_ms for r in service],
               Target("<=", 3 * top_p99, f"≤ 3× the ceiling's ({3 * top_p99:.1f})"), (bare, top_p99)),
        Figure("api.ceiling.rate", "API page", f"ceiling: {bare}", "req/s", [r.rate for r in ceiling]),
        Figure("api.ceiling.p99", "API page", "ceiling: p99 latency", "ms", [r.p99_ms for r in ceiling]),
        Figure("memory.cached", "Server memory", "server RSS after each load run", "MiB", rss, Target("<=", 1.5 * 1024)),
    ]


def page_time_figures(server: Process, api_key: str, warm: Warm, folder: Path, runs: int, seconds: float) -> list[Figure]:
    """The server time of one warm page (issue 3: ≤ 5 ms at 1,000,000 records), from
    outside on one connection: each round trip is the server's time plus the loopback's
    and wrk's, an upper bound; the ceiling on one connection is the part not ours."""
    bare_runs, service, _ = alternate(server, warm, api_key, folder, runs, seconds, 1, int(seconds * 5_000))
    label = "bare Tornado handler on one connection"
    note = (f"{len(warm.paths)} distinct cursored pages of one query on one connection: each request's whole "
            "round trip on 127.0.0.1, an upper bound of the server's time")
    return [
        Figure("page.server_time_p50", "API page", "warm page of 100 rows, one connection: p50 round trip", "ms",
               [r.p50_ms for r in service], Target("<=", 5.0), (label, statistics.median(r.p50_ms for r in bare_runs)), note),
        Figure("page.server_time_p99", "API page", "warm page of 100 rows, one connection: p99 round trip", "ms",
               [r.p99_ms for r in service], None, (label, statistics.median(r.p99_ms for r in bare_runs))),
    ]


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
    lineups = Lineups(sessions)
    rows = lineups.frame(dataset.buyer_id, LineupQuery())
    days = pd.to_datetime(rows["combined_date"].dropna()).dt.date.unique()
    best = (LineupQuery(date_from=days[0], date_to=days[0]), 0)
    low, high = 0, len(days) - 1
    while low <= high:
        middle = (low + high) // 2
        query = LineupQuery(date_from=days[0], date_to=days[middle])
        count = lineups.count(dataset.buyer_id, query)
        if count <= target_rows:
            best, low = (query, count), middle + 1
        else:
            high = middle - 1
    sessions.kw["bind"].dispose()
    return best


def create_link(dataset: Dataset, server: Process, query: LineupQuery) -> str:
    """A new share link of the bench buyer for `query`, as an operator makes one."""
    command = [*lineups_command(), "link", "create", dataset.buyer_name, urlencode(query.to_params()),
               "--json", "--db", dataset.db_url, "--base-url", server.base_url]
    return json.loads(subprocess.run(command, capture_output=True, text=True, check=True, timeout=120).stdout)["url"]


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


# ---------------------------------------------------------------- the explorer
def explorer_figures(folder: Path, runs: int) -> list[Figure]:
    """First view (cold: a server just started, an empty browser cache; and warm) and
    filter changes, the medians of `runs` runs of the browser test, which writes its
    timings beside its screenshots."""
    labels = {
        "explorer.first_view": ("first view after login, cold (first sign-in to a server just started, empty browser cache)",
                                Target("<=", 2.0), lambda t: t["first_view_after_login_s"]["cold"]),
        "explorer.first_view_warm": ("first view after login, warm (a later sign-in)", None,
                                     lambda t: t["first_view_after_login_s"]["warm"]),
        "explorer.charts": ("both charts drawn after login, cold", None, lambda t: t["charts_drawn_after_login_s"]["cold"]),
        "explorer.filter_median": ("filter change to table updated: median of 5 changes", Target("<=", 1.0),
                                   lambda t: t["filter_change_to_table_update_s"]["median"]),
        "explorer.filter_max": ("filter change to table updated: slowest of 5 changes", Target("<=", 1.0),
                                lambda t: t["filter_change_to_table_update_s"]["max"]),
    }
    timings, why = [], f"{CHROMIUM} is missing (apt-get install chromium)"
    for number in range(runs if CHROMIUM.exists() else 0):
        shots = folder / f"explorer-{number}" / "screenshots"
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", BROWSER_TEST], cwd=REPO,
                              env={**os.environ, "LINEUPS_SCREENSHOTS": str(shots)}, capture_output=True, text=True)
        if done.returncode == 0:
            timings.append(json.loads((shots.parent / "explorer-timings.json").read_text()))
        else:  # a failed browser run is reported, not fatal to the bench
            print(f"the explorer browser run failed:\n{done.stdout[-3000:]}{done.stderr[-2000:]}", file=sys.stderr)
            why = f"the browser test failed in {number + 1 - len(timings)} of {runs} runs (see the bench's log)"
    if not timings:
        return [missing(id, "Explorer", label, "s", why, target) for id, (label, target, _) in labels.items()]
    return [Figure(id, "Explorer", label, "s", [value(t) for t in timings], target) for id, (label, target, value) in labels.items()]


# ---------------------------------------------------------------- the run
def step(name: str, function, *args, **kwargs):
    with stage("bench", name):
        return function(*args, **kwargs)


def measure(args: argparse.Namespace, folder: Path) -> list[Figure]:
    records, runs, quick = args.records, args.runs, args.quick
    figures = step("ingest", ingest_figures, records, runs, args.pg or None)
    figures += step("cold merge", merge_figures, records, runs)
    dataset = step("building the service store", build_store, folder, records)
    figures = step("mixed workload", mixed_figures, dataset, folder, 100 if quick else 1_500, not quick,
                   2_000 if quick else 100_000, daily_runs=runs) + figures
    rows, render_rate = step("CSV writer alone", render_reference, dataset, runs)
    share_rows = min(100_000, records // 10)
    query, _ = step("choosing the share link", share_query, dataset, share_rows)
    reference = ("CSV writer alone, in process", render_rate)
    with start_service(dataset, folder) as server:
        warm = step("asking the pages once", warm_pages, server, dataset.api_key, 20 if quick else 200)
        figures += step("API load", api_figures, server, dataset.api_key, warm, folder, runs, args.seconds, 32)
        figures += step("page server time", page_time_figures, server, dataset.api_key, warm, folder, runs,
                        args.page_seconds)
        for id, label, link_query, target in (
                ("export.whole", "CSV export of the whole store through a share link", LineupQuery(), 300_000),
                ("export.share", f"share link of ~{share_rows:,} rows (`from`/`to` of the first days)", query, 200_000)):
            url = step(f"share link ({id})", create_link, dataset, server, link_query)
            figures += step(id, export_figures, id, label, url, server.pid, runs, Target(">=", target), reference)
    if not quick:
        figures += step("explorer in Chromium", explorer_figures, folder, runs)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench full", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="about 20,000 records and short loads (a few minutes)")
    parser.add_argument("--records", type=int, default=None, help="store size (default 1,000,000; quick 20,000)")
    parser.add_argument("--runs", type=int, default=3, help="repetitions of each figure (default 3)")
    parser.add_argument("--seconds", type=float, default=None, help="seconds of each load run (default 10; quick 2)")
    parser.add_argument("--pg", default=DEFAULT_PG, help="PostgreSQL URL for the ingest figure ('' to skip)")
    parser.add_argument("--results", type=Path, default=RESULTS, help="where the result file goes")
    args = parser.parse_args(argv)
    args.records = args.records or (20_000 if args.quick else 1_000_000)
    args.page_seconds = args.seconds or 3.0
    args.seconds = args.seconds or (2 if args.quick else 10)
    measured, where = now(), machine()
    with tempfile.TemporaryDirectory(prefix="lineups-bench-") as tmp:
        figures = measure(args, Path(tmp))
    print_figures(figures)
    path = save("full-quick" if args.quick else "full", figures, measured=measured, where=where, store="sqlite",
                records=args.records, argv=argv, folder=args.results)
    say("bench", f"wrote {path}")
    return 0
