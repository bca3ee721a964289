"""The mixed workload of real use (issue 15), the headline: many buyers, each on their
own subscriptions, each asking distinct filtered questions of a fresh server, while
the data changes under them; beside Datasette over the same records and filters.

    python -m bench mixed [--records 250000 1000000] [--steps …] [--pg URL | --own-pg]

On a bench store (`bench/stores.py`: 20 feeds) with 7 buyers on different subsets of
the feeds (one on all), one `lineups serve` process, freshly started:

1. start-up: seconds until /healthz answers, then each buyer's first page (no warming);
2. `load`: distinct first pages of /v1/lineups (random port / country / commodity, leaf
   or group / date windows / `latest` / `merge=by_source`, each buyer's own key) from 4
   keep-alive connections, each URL asked once; the server's memory after;
3. `subscription`: a buyer gains a feed (a feed set no view holds yet) under load: that
   buyer's slowest page during and just after it, the command's seconds (the operator's
   wait), and how much other buyers' pages were delayed meanwhile;
4. `ingest`: a 100,000-record `lineups ingest` under load: its rows/s with the view
   upkeep, and the delay of other buyers' pages;
5. `daily`: a 1,000-record daily update, each in a fresh process, timed until a reader
   sees it in every view (`bench/daily.py`);
6. `datasette`: the same questions of Datasette, as it comes and set up as an API
   (`bench/datasette.py`; SQLite only).

With `--pg URL` each store is built in a new schema of that database (dropped after);
`--own-pg` on a PostgreSQL server of the run's own, set up as docs/deploying.md
recommends. Each store size writes one result file. Load only targets 127.0.0.1;
every process started is stopped.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import requests

from bench import daily, datasette
from bench.figures import RESULTS, Figure, Target, machine, now, print_figures, save, say
from bench.ingest import write_feed_file
from bench.load import CLIENTS, Probe, load_pass
from bench.processes import EXPLORER_READY, Process, lineups_command, rss_mib
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
    server, startup = start_server(dataset, folder)
    with server:
        firsts = [timed_get(server.base_url + path_of({"limit": "100"}), key)[0] for _, key, _ in buyers.keys.values()]
        figures += [
            Figure("mixed.startup", SECTION, "fresh `lineups serve`: seconds until /healthz answers", "s",
                   [startup], Target("<=", 2.0)),
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
    env = {**os.environ, **store_env(dataset)}
    mine = [(path_of(p), k) for n, k, p in asks if n == name]
    with Probe(server.base_url, others, quiet_rounds=QUIET_ROUNDS) as probe, Probe(server.base_url, mine[:50]) as own:
        start = time.perf_counter()
        subprocess.run([*lineups_command(), "subscription", "set", buyer_id, extra, "active"], env=env,
                       check=True, capture_output=True)
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
    env = {**os.environ, **store_env(dataset)}
    with Probe(server.base_url, others, quiet_rounds=QUIET_ROUNDS) as probe:
        start = time.perf_counter()
        done = subprocess.run([*lineups_command(), "ingest", dataset.feed_ids[-1], str(path), "--json"], env=env,
                              check=True, capture_output=True, text=True)
        seconds = time.perf_counter() - start
    report = json.loads(done.stdout)
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
    parser = argparse.ArgumentParser(prog="python -m bench mixed", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, nargs="+", default=[250_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=1_500)
    parser.add_argument("--ingest-rows", type=int, default=100_000)
    parser.add_argument("--daily-runs", type=int, default=3)
    parser.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS), help="the steps to run (default all)")
    parser.add_argument("--results", type=Path, default=RESULTS, help="where the result files go")
    where_pg = parser.add_mutually_exclusive_group()
    where_pg.add_argument("--pg", default=None, metavar="URL",
                          help="build and serve each store in a new schema of this PostgreSQL database (dropped after)")
    where_pg.add_argument("--own-pg", action="store_true",
                          help="as --pg, on a PostgreSQL server of the run's own set up as docs/deploying.md recommends")
    args = parser.parse_args(argv)
    with own_server() if args.own_pg else contextlib.nullcontext(args.pg) as pg_url:
        for records in args.records:
            measured, where = now(), machine()
            schemas = fresh_schema(pg_url, "bench_mixed_") if pg_url else contextlib.nullcontext()
            with tempfile.TemporaryDirectory(prefix="lineups-mixed-") as tmp, schemas as schema:
                say("mixed", f"building a store of {records:,} records …")
                dataset = build_store(Path(tmp), records, db_url=pg_url, db_schema=schema)
                figures = mixed_figures(dataset, Path(tmp), args.queries, ingest_rows=args.ingest_rows,
                                        steps=tuple(args.steps), daily_runs=args.daily_runs)
            print_figures(figures)
            store = "sqlite" if pg_url is None else ("postgresql-own" if args.own_pg else "postgresql")
            path = save("mixed", figures, measured=measured, where=where, store=store, records=dataset.records,
                        argv=argv, folder=args.results)
            say("mixed", f"wrote {path}")
    return 0
