"""The mixed workload of real use (issue 15), the headline: buyers on their own
subscriptions asking distinct filtered questions of a fresh server while the data
changes under them, beside Datasette over the same records and filters.

    python -m bench mixed [--records 250000 1000000] [--steps …] [--pg URL | --own-pg]

On a bench store (`bench/stores.py`) with 7 buyers on different subsets of its 20 feeds,
one fresh `lineups serve`: its start-up and each buyer's first page, unwarmed; then the
steps: `load`, distinct first pages from 4 connections, each URL once, and the server's
memory after; `subscription`, a buyer gains a feed (a set no view holds yet) under load;
`ingest`, a 100,000-record `lineups ingest` under load (both: how much other buyers'
pages were delayed); `daily`, a 1,000-record update until every view shows it
(`bench/daily.py`); `datasette`, the same questions of Datasette (`bench/datasette.py`,
SQLite only). `--pg` builds each store in a new schema of that database, `--own-pg` on
a PostgreSQL of the run's own set up as docs/deploying.md recommends.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import time
from pathlib import Path

import requests

from bench import daily, datasette
from bench.figures import Figure, Run, Target, command, stage
from bench.ingest import write_feed_file
from bench.load import CLIENTS, Probe, load_pass
from bench.processes import EXPLORER_READY, Process, lineups, rss_mib
from bench.stores import Buyers, Dataset, add_buyers, build_store, fresh_schema, own_server, path_of, questions, \
    start_server, store_env

#: Quiet answers of each other buyer's page before a change, the quickest kept: what its
#: answers during the change are compared with (`Probe.worst_delay`).
QUIET_ROUNDS = 3
#: The steps after start-up and each buyer's first page, in the order they run.
STEPS = ("load", "subscription", "ingest", "daily", "datasette")
SECTION = "Mixed workload"


def timed_get(url: str, key: str | None, timeout: float = 60) -> tuple[float, int]:
    start = time.perf_counter()
    response = requests.get(url, headers={"X-API-Key": key} if key else {}, timeout=timeout)
    return time.perf_counter() - start, response.status_code


def mixed_figures(dataset: Dataset, folder: Path, count: int, with_datasette: bool = True,
                  ingest_rows: int = 100_000, steps: tuple[str, ...] = STEPS, daily_runs: int = 3) -> list[Figure]:
    """The figures of the mixed workload's `steps` on `dataset` (start-up and first pages
    always), `count` distinct questions, `daily_runs` daily updates."""
    size = f"{dataset.records:,} records"
    buyers, views_s, kept = add_buyers(dataset)
    asks = questions(buyers, count)
    figures = [
        Figure("mixed.views", SECTION, f"building every buyer's views ({len(buyers.keys)} buyers, {size})",
               "s", [views_s], note=f"{kept['views']} views, {kept['rows']:,} rows"),
        Figure("mixed.view_bytes", SECTION,
               f"storage of the views: bytes per kept row ({'SQLite' if dataset.is_sqlite else 'PostgreSQL'}, with indexes)",
               "B", [kept["bytes"] / max(kept["rows"], 1)]),
    ]
    with start_server(dataset, folder) as server:
        firsts = [timed_get(server.base_url + path_of({"limit": "100"}), key)[0] for _, key, _ in buyers.keys.values()]
        figures += [
            Figure("mixed.startup", SECTION, "fresh `lineups serve`: seconds until /healthz answers", "s",
                   [server.ready_s], Target("<=", 2.0)),
            Figure("mixed.first_page", SECTION, f"then each buyer's first page, no warming (slowest of {len(firsts)})",
                   "s", [max(firsts)], Target("<=", 2.0)),
        ]
        if "load" in steps:
            figures += load_figures(server, asks, len(buyers.keys), size)
        others = [(path_of(p), k) for n, k, p in asks[:50] if n != "Mixed Buyer 1"]
        if "subscription" in steps:
            figures += subscription_change(dataset, buyers, server, asks, others)
        if "ingest" in steps:
            figures += big_ingest(dataset, server, others, folder, ingest_rows)
    if "daily" in steps:
        figures += daily.fresh_daily_update(dataset, runs=daily_runs)
    if with_datasette and "datasette" in steps and dataset.is_sqlite:
        figures += datasette.datasette_figures(dataset, buyers, asks, folder)
    return figures


def load_figures(server: Process, asks: list, buyers: int, size: str) -> list[Figure]:
    """The distinct first pages of `asks` from `CLIENTS` connections, and the server's
    memory after them with its explorer loaded (a fresh process builds it once its API is
    quiet: here after the pass, so that the figure is the whole server's)."""
    ours = load_pass(server.base_url, [(path_of(p), k) for _, k, p in asks])
    server.wait_for_log(EXPLORER_READY)
    rss = rss_mib(server.pid)
    return [
        Figure("mixed.rate", SECTION, f"distinct first pages/s, {CLIENTS} clients, {buyers} buyers ({size})",
               "req/s", [ours.rate], Target(">=", 150)),
        Figure("mixed.p50", SECTION, "p50 latency", "ms", [ours.p50_ms]),
        Figure("mixed.p99", SECTION, "p99 latency", "ms", [ours.p99_ms], Target("<=", 250)),
        Figure("mixed.errors", SECTION, "responses other than 200, errors", "", [ours.errors], Target("<=", 0)),
        Figure("mixed.rss", SECTION, "server RSS after the pass (explorer loaded)", "MiB", [rss], Target("<=", 600)),
    ]


def subscription_change(dataset: Dataset, buyers: Buyers, server: Process, asks: list, others: list) -> list[Figure]:
    """A buyer gains a feed while that buyer and others ask distinct pages: the CLI
    command builds the new set's views, then makes the change, which takes effect when it
    returns (the buyer's first pages after it must list the new feed)."""
    name = "Mixed Buyer 1"
    buyer_id, key, feeds = buyers.keys[name]
    extra = next(f for f in dataset.feed_ids if f not in feeds)
    mine = [(path_of(p), k) for n, k, p in asks if n == name]
    with Probe(server.base_url, others, quiet_rounds=QUIET_ROUNDS) as probe, Probe(server.base_url, mine[:50]) as own:
        start = time.perf_counter()
        lineups("subscription", "set", buyer_id, extra, "active", "--wait", env=store_env(dataset))
        command_s = time.perf_counter() - start
        listed = requests.get(server.base_url + "/v1/sources", headers={"X-API-Key": key}, timeout=60).json()
        after = [timed_get(server.base_url + path, key) for path in [path_of({"limit": "100"}), *(p for p, _ in mine[50:60])]]
    if extra not in {s["id"] for s in listed["sources"]}:
        raise RuntimeError("the subscription change did not take effect when its command returned")
    slowest = max([*own.times, *(t for t, _ in after)])
    statuses = sorted({status for _, status in after})
    return [
        Figure("mixed.subscription", SECTION,
               "subscription change (new feed set): that buyer's slowest page, during it and just after", "s",
               [slowest], Target("<=", 3.0),
               note=f"{len(own.times)} pages during, {len(after)} after (first {after[0][0] * 1000:.0f} ms, "
                    f"status {statuses}); the new feed listed at once"),
        Figure("mixed.subscription.command", SECTION, "the command: builds the new set's views, then makes the change",
               "s", [command_s]),
        Figure("mixed.subscription.others", SECTION, "meanwhile, the slowest page of other buyers", "ms",
               [probe.worst * 1000], note=probe.spread()),
        Figure("mixed.subscription.delay", SECTION,
               "meanwhile, the most another buyer's page was delayed (against its quiet time)", "ms",
               [probe.worst_delay * 1000], Target("<=", 200), note=probe.delays()),
    ]


def big_ingest(dataset: Dataset, server: Process, others: list, folder: Path, rows: int) -> list[Figure]:
    """`lineups ingest` of `rows` records into one feed under load: rows/s of the whole
    command (records and view upkeep), and how much others' pages were delayed."""
    path = folder / "big-ingest.csv"
    count = write_feed_file(path, rows, seed=99)
    with Probe(server.base_url, others, quiet_rounds=QUIET_ROUNDS) as probe:
        start = time.perf_counter()
        done = lineups("ingest", dataset.feed_ids[-1], str(path), "--json", env=store_env(dataset))
        seconds = time.perf_counter() - start
    report = json.loads(done)
    return [
        Figure("mixed.ingest", SECTION, f"`lineups ingest` of {count:,} records under load (records and view upkeep)",
               "rows/s", [count / seconds], note=f"{report['inserted']:,} inserted in {seconds:.1f} s"),
        Figure("mixed.ingest.others", SECTION, "meanwhile, the slowest page of other buyers", "ms",
               [probe.worst * 1000], note=probe.spread()),
        Figure("mixed.ingest.delay", SECTION,
               "meanwhile, the most another buyer's page was delayed (against its quiet time)", "ms",
               [probe.worst_delay * 1000], Target("<=", 200), note=probe.delays()),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = command("mixed", __doc__)
    parser.add_argument("--records", type=int, nargs="+", default=[250_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=1_500)
    parser.add_argument("--ingest-rows", type=int, default=100_000)
    parser.add_argument("--daily-runs", type=int, default=3)
    parser.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS), help="the steps to run (default all)")
    where_pg = parser.add_mutually_exclusive_group()
    where_pg.add_argument("--pg", default=None, metavar="URL",
                          help="build and serve each store in a new schema of this PostgreSQL database (dropped after)")
    where_pg.add_argument("--own-pg", action="store_true",
                          help="as --pg, on a PostgreSQL server of the run's own set up as docs/deploying.md recommends")
    args = parser.parse_args(argv)
    store = "sqlite" if not (args.pg or args.own_pg) else ("postgresql-own" if args.own_pg else "postgresql")
    with own_server() if args.own_pg else contextlib.nullcontext(args.pg) as pg_url:
        for records in args.records:
            run = Run("mixed", args.results, argv)
            schemas = fresh_schema(pg_url, "bench_mixed_") if pg_url else contextlib.nullcontext()
            with tempfile.TemporaryDirectory(prefix="lineups-mixed-") as tmp, schemas as schema:
                with stage("mixed", f"building a store of {records:,} records"):
                    dataset = build_store(Path(tmp), records, db_url=pg_url, db_schema=schema)
                figures = mixed_figures(dataset, Path(tmp), args.queries, ingest_rows=args.ingest_rows,
                                        steps=tuple(args.steps), daily_runs=args.daily_runs)
            run.save(figures, dataset.records, store)
    return 0
