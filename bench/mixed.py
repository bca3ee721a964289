"""The mixed workload of real use (issue 15): many buyers, each with their own
subscriptions, each asking distinct filtered questions, beside Datasette over the same
records and filters.

On a bench store (`bench/dataset.py`: 20 feeds) with `BUYERS` buyers subscribed to
different subsets of the feeds (one to all), one `lineups serve` process, freshly
started:

1. start-up: seconds until /healthz answers, then each buyer's first page (no warming);
2. `queries` distinct first pages of /v1/lineups (random port / country / commodity,
   leaf or group / date windows / `latest` / `merge=by_source`, each buyer's own key),
   from `CLIENTS` concurrent keep-alive connections (wrk, each URL asked once);
3. the same questions of Datasette over the raw records (the filters it can express:
   a buyer's feeds, port, country, commodity leaves, dates; no merge, no `latest`),
   twice: as it comes (each table page counts its rows and suggests facets, no index
   for these filters), and set up as a user serving these questions as an API would
   set it up (`TUNED_INDEXES`, `TUNED_ARGS`: the service's pages count nothing);
4. during load: a subscription change that makes a new feed set (the changed buyer's
   slowest page during and just after it, the command's seconds, and how much other
   buyers' pages were delayed meanwhile), and a
   100,000-record ingest (its rows/s and its view upkeep, and the delay of others);
5. a 1,000-record daily update: seconds from its start until a reader sees it in every
   view (the commit), and the command's own wait; the median of several updates, each
   a different change in a fresh process;
6. the server's memory after the pass.

With `--pg URL` each store is built in a new schema of that PostgreSQL database
(dropped afterwards) instead of a SQLite file, and served from it; Datasette, which
reads SQLite files, is then left out. `--own-pg` does the same on a PostgreSQL server
of the run's own, set up as docs/deploying.md recommends (`bench/own_postgres.py`),
instead of the machine's, which runs Debian's defaults.

Its parts: `bench/probe.py` (other buyers' pages during step 4), `bench/daily.py`
(step 5), `bench/against_datasette.py` (step 3), `bench/mixed_report.py` (the table and
the chart of latency and memory against store size).

Load only ever targets 127.0.0.1; every process started is stopped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

import requests
from sqlalchemy import func, select, text

from daily import fresh_daily_update
from dataset import ANCHOR, Dataset, fresh_schema
from figures import Figure, Target
from load import WRK
from own_postgres import describe, own_server
from probe import Probe
from processes import Process, free_port, rss_mib
from server_figures import EXPLORER_READY, RATE_LIMIT, lineups_command

from store.access import accounts

from store.intake import demo
from store.database.db import make_sessionmaker, transaction
from store.database.schema import Feed, MergedRow, MergedView
from store.reference.taxonomy import default_taxonomy
from store.views import builds

BUYERS = 7
CLIENTS = 4
#: Quiet answers of each of the other buyers' pages before a change, the quickest kept: what
#: their answers during it are compared with (`Probe.worst_delay`).
QUIET_ROUNDS = 3
SEED = 15
#: The steps after start-up and each buyer's first page, in the order they run.
STEPS = ("load", "subscription", "ingest", "daily", "datasette")


@dataclasses.dataclass(frozen=True)
class Buyers:
    """The bench's buyers: name → (id, API key, subscribed feed ids)."""

    keys: dict[str, tuple[str, str, tuple[str, ...]]]


def add_buyers(dataset: Dataset, count: int = BUYERS, seed: int = SEED) -> tuple[Buyers, float, dict]:
    """`count` buyers on different subsets of the feeds (the dataset's buyer sees all),
    their views built as a subscription change builds them; returns them, the seconds
    the views took, and what the views hold (rows, bytes of the database file; on
    PostgreSQL, of the schema's tables with their indexes)."""
    rng = random.Random(seed)
    engine = dataset.engine()
    sessions = make_sessionmaker(engine)
    keys = {dataset.buyer_name: (dataset.buyer_id, dataset.api_key, dataset.feed_ids)}
    with transaction(sessions) as session:
        for i in range(count - 1):
            feeds = tuple(sorted(rng.sample(dataset.feed_ids, rng.randint(3, len(dataset.feed_ids) - 2))))
            buyer = accounts.add_buyer(session, f"Mixed Buyer {i + 1}")
            key, _ = accounts.create_key(session, buyer)
            for feed_id in feeds:
                accounts.set_subscription(session, buyer, session.get(Feed, feed_id), "active")
            keys[buyer.name] = (buyer.id, key, feeds)
    before = _store_bytes(dataset)
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
    return Buyers(keys), seconds, {"views": views, "rows": rows, "bytes": _store_bytes(dataset) - before}


def _store_bytes(dataset: Dataset) -> int:
    """Bytes of the SQLite file and its WAL; on PostgreSQL, of the schema's tables
    with their indexes and TOAST."""
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


def questions(buyers: Buyers, count: int, seed: int = SEED) -> list[tuple[str, str, dict]]:
    """`count` distinct (buyer name, API key, query parameters) first-page questions."""
    rng = random.Random(seed)
    taxonomy = default_taxonomy()
    ports = sorted({p for f in demo.DEMO_FEEDS for p in f.ports})
    directory = {p: demo_country(p) for p in ports}
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
            params["from"] = _day(start)
            if pick() < 0.7:
                params["to"] = _day(start + rng.randint(0, 30))
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


def _day(ordinal: int) -> str:
    import datetime as dt

    return dt.date.fromordinal(ordinal).isoformat()


def demo_country(unlocode: str) -> str:
    from store.reference.ports import default_directory

    return default_directory().get(unlocode).country_name


# ---------------------------------------------------------------- load
_LUA = """
local requests = {%(requests)s}
local i, answered = 0, 0
request = function()
  i = i + 1
  local r = requests[(i - 1) %% #requests + 1]
  return wrk.format("GET", r[1], {["X-API-Key"] = r[2]})
end
response = function(status, headers, body)
  answered = answered + 1
  if answered == #requests then
    local marker = io.open(%(marker)s, "w")
    marker:write("done")
    marker:close()
    wrk.thread:stop()
  end
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests": %%d, "duration_us": %%d, "p50_us": %%d, "p99_us": %%d, "errors": %%d, "status_errors": %%d}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.status + e.timeout, e.status))
end
"""


@dataclasses.dataclass(frozen=True)
class Pass:
    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    errors: int

    @property
    def rate(self) -> float:
        return self.requests / self.seconds


def load_pass(base_url: str, asks: list[tuple[str, str]], connections: int = CLIENTS, seconds: float = 120.0) -> Pass:
    """Each (path, key) of `asks` once (a distinct question each), over `connections`
    keep-alive connections (wrk, one thread); stops once all are answered, or after
    `seconds`, whichever comes first."""
    if not WRK:
        raise RuntimeError("wrk is needed (Debian's package wrk)")
    folder = Path(tempfile.mkdtemp(prefix="lineups-wrk-"))
    marker = folder / "done"
    script = _LUA % {
        "requests": ", ".join(f"{{{json.dumps(p)}, {json.dumps(k)}}}" for p, k in asks),
        "marker": json.dumps(str(marker)),
    }
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as handle:
        handle.write(script)
    try:
        # wrk's own summary counts its whole -d; interrupted (SIGINT) once every
        # question is answered, it reports the time it really ran.
        command = [WRK, "-t1", f"-c{connections}", f"-d{int(seconds)}s", "--timeout", "30s", "-s", handle.name, base_url]
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        deadline = time.monotonic() + seconds + 5
        while proc.poll() is None and not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        out = proc.communicate(timeout=60)[0]
    finally:
        Path(handle.name).unlink()
        shutil.rmtree(folder, ignore_errors=True)
    figures = json.loads([line for line in out.splitlines() if line.startswith("{")][-1])
    return Pass(figures["requests"], figures["duration_us"] / 1e6, figures["p50_us"] / 1000,
                figures["p99_us"] / 1000, figures["errors"])


def timed_get(url: str, key: str | None, timeout: float = 60) -> tuple[float, int]:
    start = time.perf_counter()
    response = requests.get(url, headers={"X-API-Key": key} if key else {}, timeout=timeout)
    return time.perf_counter() - start, response.status_code


def path_of(params: dict) -> str:
    return "/v1/lineups?" + urlencode(params)


def store_env(dataset: Dataset) -> dict[str, str]:
    """The environment that points a `lineups` command at the dataset's store (on
    PostgreSQL with the signing secret that a store other than SQLite requires, one per
    store)."""
    if dataset.is_sqlite:
        return {"LINEUPS_DB": dataset.db_url}
    return {"LINEUPS_DB": dataset.db_url, "LINEUPS_DB_SCHEMA": dataset.db_schema or "",
            "LINEUPS_SECRET": f"bench-mixed-{dataset.db_schema}-{dataset.buyer_id}"}


def start_server(dataset: Dataset, folder: Path, name: str = "serve") -> tuple[Process, float]:
    """A fresh `lineups serve` and the seconds until it answered /healthz."""
    port = free_port()
    env = {"LINEUPS_RATE_LIMIT": str(RATE_LIMIT), "LINEUPS_BASE_URL": f"http://127.0.0.1:{port}", **store_env(dataset)}
    command = [*lineups_command(), "serve", "--host", "127.0.0.1", "--port", str(port)]
    start = time.perf_counter()
    server = Process(command, port, folder / f"{name}.log", env).start("/healthz")
    return server, time.perf_counter() - start


# ---------------------------------------------------------------- the run
def mixed_figures(dataset: Dataset, folder: Path, count: int, with_datasette: bool = True,
                  ingest_rows: int = 100_000, steps: tuple[str, ...] = STEPS,
                  daily_runs: int = 3) -> tuple[list[Figure], dict]:
    """The figures of the mixed workload's `steps` on `dataset` (start-up and first pages
    always), and the raw results (for the chart of latency and memory against store
    size); `daily_runs` daily updates (`fresh_daily_update`)."""
    size = f"{dataset.records:,} records"
    buyers, views_s, kept = add_buyers(dataset)
    asks = questions(buyers, count)
    figures = [
        Figure("mixed.views", "Mixed workload", f"building every buyer's views ({len(buyers.keys)} buyers, {size})",
               "s", [views_s], note=f"{kept['views']} views, {kept['rows']:,} rows"),
        Figure("mixed.view_bytes", "Mixed workload",
               f"storage of the views: bytes per kept row ({'SQLite' if dataset.is_sqlite else 'PostgreSQL'}, with indexes)",
               "B", [kept["bytes"] / max(kept["rows"], 1)]),
    ]
    raw: dict = {"records": dataset.records, "views_s": views_s, **{f"kept_{k}": v for k, v in kept.items()}}
    server, startup = start_server(dataset, folder)
    with server:
        firsts = [timed_get(server.base_url + path_of({"limit": "100"}), key)[0] for _, key, _ in buyers.keys.values()]
        figures += [
            Figure("mixed.startup", "Mixed workload", "fresh `lineups serve`: seconds until /healthz answers", "s",
                   [startup], Target("<=", 2.0)),
            Figure("mixed.first_page", "Mixed workload", f"then each buyer's first page, no warming (slowest of {len(firsts)})",
                   "s", [max(firsts)], Target("<=", 2.0)),
        ]
        if "load" in steps:
            figures += load_figures(server, asks, len(buyers.keys), size, raw)
        others = [(path_of(p), k) for n, k, p in asks[:50] if n != "Mixed Buyer 1"]
        if "subscription" in steps:
            figures += subscription_change(dataset, buyers, server, asks, others, folder)
        if "ingest" in steps:
            figures += big_ingest(dataset, server, others, folder, ingest_rows)
    if "daily" in steps:
        figures += fresh_daily_update(dataset, runs=daily_runs)
    if with_datasette and "datasette" in steps and dataset.is_sqlite:
        from against_datasette import datasette_figures  # it imports this module

        figures += datasette_figures(dataset, buyers, asks, folder, raw)
    return figures, raw


def load_figures(server: Process, asks: list, buyers: int, size: str, raw: dict) -> list[Figure]:
    """The distinct first pages of `asks` from `CLIENTS` connections: rate, latency,
    errors, and the server's memory after them, with its explorer loaded (a fresh
    process builds it once its API is quiet: here, after the pass, so that the figure
    is the whole server's)."""
    ours = load_pass(server.base_url, [(path_of(p), k) for _, k, p in asks])
    server.wait_for_log(EXPLORER_READY)
    rss = rss_mib(server.pid)
    raw.update(ours=dataclasses.asdict(ours), ours_rate=ours.rate, rss_mib=rss)
    return [
        Figure("mixed.rate", "Mixed workload", f"distinct first pages/s, {CLIENTS} clients, {buyers} buyers ({size})",
               "req/s", [ours.rate], Target(">=", 150)),
        Figure("mixed.p50", "Mixed workload", "p50 latency", "ms", [ours.p50_ms]),
        Figure("mixed.p99", "Mixed workload", "p99 latency", "ms", [ours.p99_ms], Target("<=", 250)),
        Figure("mixed.errors", "Mixed workload", "responses other than 200, errors", "", [ours.errors], Target("<=", 0)),
        Figure("mixed.rss", "Mixed workload", "server RSS after the pass (explorer loaded)", "MiB", [rss], Target("<=", 600)),
    ]


def subscription_change(dataset: Dataset, buyers: Buyers, server: Process, asks: list, others: list,
                        folder: Path) -> list[Figure]:
    """A buyer gains a feed (a feed set no view holds yet) while that buyer and other
    buyers ask distinct pages: the CLI command builds the new set's views, then makes
    the change, which takes effect when it returns. What the buyer waits for is their
    slowest page during the change and their first pages after it (which must list the
    new feed); the command's seconds are the operator's wait; and the slowest of the
    others' pages meanwhile."""
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
        Figure("mixed.subscription", "Mixed workload",
               "subscription change (new feed set): that buyer's slowest page, during it and just after", "s",
               [slowest], Target("<=", 3.0),
               note=f"{len(own.times)} pages during, {len(after)} after (first {after[0][0] * 1000:.0f} ms, "
                    f"status {statuses}); the new feed listed at once"),
        Figure("mixed.subscription.command", "Mixed workload",
               "the command: builds the new set's views, then makes the change", "s", [command_s]),
        Figure("mixed.subscription.others", "Mixed workload", "meanwhile, the slowest page of other buyers", "ms",
               [probe.worst * 1000], note=probe.spread()),
        Figure("mixed.subscription.delay", "Mixed workload",
               "meanwhile, the most another buyer's page was delayed (against its quiet time)", "ms",
               [probe.worst_delay * 1000], Target("<=", 200), note=probe.delays()),
    ]


def big_ingest(dataset: Dataset, server: Process, others: list, folder: Path, rows: int) -> list[Figure]:
    """`lineups ingest` of `rows` records into one feed under load: rows/s of the
    whole command (records and view upkeep), and the slowest page of others."""
    from ingest_bench import write_feed_file

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
        Figure("mixed.ingest", "Mixed workload", f"`lineups ingest` of {count:,} records under load (records and view upkeep)",
               "rows/s", [count / seconds], note=f"{report['inserted']:,} inserted in {seconds:.1f} s"),
        Figure("mixed.ingest.others", "Mixed workload", "meanwhile, the slowest page of other buyers", "ms",
               [probe.worst * 1000], note=probe.spread()),
        Figure("mixed.ingest.delay", "Mixed workload",
               "meanwhile, the most another buyer's page was delayed (against its quiet time)", "ms",
               [probe.worst_delay * 1000], Target("<=", 200), note=probe.delays()),
    ]


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - a command
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, nargs="+", default=[250_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=1_500)
    parser.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS),
                        help="the steps to run (default all); with --out to a file of their own")
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks-mixed.md"))
    where_pg = parser.add_mutually_exclusive_group()
    where_pg.add_argument("--pg", default=None, metavar="URL",
                          help="build and serve each store in a new schema of this PostgreSQL database (dropped after) "
                               "instead of a SQLite file; Datasette is then left out")
    where_pg.add_argument("--own-pg", action="store_true",
                          help="as --pg, on a PostgreSQL server of the run's own set up as docs/deploying.md recommends "
                               "(bench/own_postgres.py)")
    parser.add_argument("--keep-other-sizes", action="store_true",
                        help="keep the sizes of the existing JSON that this run does not measure (each column says when it was measured)")
    args = parser.parse_args(argv)
    kept = []
    if args.keep_other_sizes and args.out.with_suffix(".json").exists():
        kept = [r for r in json.loads(args.out.with_suffix(".json").read_text()) if r["raw"]["records"] not in args.records]
    with own_server() if args.own_pg else contextlib.nullcontext(args.pg) as pg_url:
        run_sizes(args, pg_url, kept)
    return 0


def run_sizes(args, pg_url: str | None, kept: list[dict]) -> None:  # pragma: no cover - a command
    """`main`'s runs, one store size at a time, on SQLite or in a new schema of
    `pg_url`; the report (beside the `kept` sizes) written after each."""
    import datetime as dt

    from dataset import build_store
    from mixed_report import write_curve  # it imports this module
    from run import machine

    results = []
    for records in args.records:
        when, where = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), machine()
        schemas = fresh_schema(pg_url, "bench_mixed_") if pg_url else contextlib.nullcontext()
        with tempfile.TemporaryDirectory(prefix="lineups-mixed-") as tmp, schemas as schema:
            print(f"[mixed] building a store of {records:,} records …", file=sys.stderr, flush=True)
            dataset = build_store(Path(tmp), records, db_url=pg_url, db_schema=schema)
            figures, raw = mixed_figures(dataset, Path(tmp), args.queries, steps=tuple(args.steps))
            results.append({"measured_at": when, "machine": where, "steps": list(args.steps), "raw": raw,
                            "store": "sqlite" if dataset.is_sqlite else "postgresql",
                            **({"postgresql": f"the run's own ({describe()})"} if args.own_pg else {}),
                            "figures": [f.as_dict() for f in figures]})
            for figure in figures:
                print(f"[mixed] {records:>9,} {figure.id:28s} {figure.median:>12,.2f} {figure.unit}", file=sys.stderr, flush=True)
        every = sorted(kept + results, key=lambda r: r["raw"]["records"])
        args.out.with_suffix(".json").write_text(json.dumps(every, indent=1, default=str) + "\n")
        write_curve(args.out, every)


if __name__ == "__main__":  # pragma: no cover
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    raise SystemExit(main())
