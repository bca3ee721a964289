"""The mixed workload's pages on PostgreSQL, one server process against two (issue 15:
"with `lineups serve --processes 2`, ≥ 1.6× the distinct first pages per second of one").

    python -m bench scaling [--records 250000] [--queries 1500] [--rounds 2] [--own-pg] [--worker-cpus C]

The bench store with the mixed workload's buyers and views in a fresh schema (`--pg`,
or `--own-pg`: a server of the run's own set up as docs/deploying.md recommends), after
`VACUUM ANALYZE`; then a fresh `lineups serve --processes N` with rate limits in Redis,
an uncounted warm-up pass with one process, then N = 1, 2, 1, 2 …, each pass its own
questions from 4 connections, each URL once. Each pass prints pages/s, p50/p99, errors,
the load and where the CPU went (server workers, PostgreSQL, wrk). The figure: the
median rate of two processes over that of one. `--worker-cpus C` holds each server
process to C of a core (a cgroup each, as root), leaving PostgreSQL the rest, as it
is in production (docs/architecture.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import resource
import statistics
import tempfile
import time
from pathlib import Path

import psutil
import requests
from sqlalchemy import text

from bench.figures import Figure, Run, Target, command, say, stage
from bench.load import CLIENTS, load_pass
from bench.processes import cpu_budget, server_pids
from bench.stores import add_buyers, build_store, describe_pg, fresh_schema, own_server, path_of, questions, start_server
from store.database.db import make_engine

PG = os.environ.get("LINEUPS_BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
REDIS = os.environ.get("LINEUPS_BENCH_REDIS", "redis://127.0.0.1:6379/13")
TARGET = 1.6


# ---------------------------------------------------------------- the schema
def vacuum_analyze(pg_url: str, schema: str) -> None:
    engine = make_engine(pg_url, statement_timeout_ms=0, schema=schema)
    try:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            tables = connection.scalars(text(
                "SELECT tablename FROM pg_tables WHERE schemaname = :schema ORDER BY tablename"), {"schema": schema}).all()
            for table in tables:
                connection.execute(text(f'VACUUM ANALYZE {schema}."{table}"'))
    finally:
        engine.dispose()


# ---------------------------------------------------------------- CPU accounting
def cpu_s(pid: int) -> float:
    """User and system CPU seconds of process `pid` (0 once it has gone)."""
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.NoSuchProcess:
        return 0.0
    return times.user + times.system


@dataclasses.dataclass
class Snapshot:
    """CPU seconds so far: the machine's (busy, total), each server process's,
    PostgreSQL's processes', and this process's waited-for children's (wrk)."""

    when: float
    machine: tuple[float, float]
    server: dict[int, float]
    postgres: dict[int, float]
    children_s: float

    @classmethod
    def take(cls, server_pids: list[int]) -> "Snapshot":
        times, usage = psutil.cpu_times(), resource.getrusage(resource.RUSAGE_CHILDREN)
        postgres = [p.pid for p in psutil.process_iter(["name"]) if p.info["name"] == "postgres"]
        return cls(time.monotonic(), (sum(times) - times.idle - times.iowait, sum(times)),
                   {p: cpu_s(p) for p in server_pids}, {p: cpu_s(p) for p in postgres}, usage.ru_utime + usage.ru_stime)


def spent(before: Snapshot, after: Snapshot) -> dict:
    """Where the CPU went between two snapshots, in CPU-seconds."""
    busy = after.machine[0] - before.machine[0]
    total = after.machine[1] - before.machine[1]
    return {
        "wall_s": after.when - before.when,
        "machine_busy": busy / total if total else 0.0,
        "machine_cpu_s": busy,
        "server_cpu_s": {p: after.server.get(p, 0.0) - s for p, s in before.server.items()},
        "postgres_cpu_s": sum(s - before.postgres.get(p, 0.0) for p, s in after.postgres.items()),
        # wrk, the one child this script waited for during the pass
        "wrk_cpu_s": after.children_s - before.children_s,
    }


_ACCESS = re.compile(r"\[(\d+)\] lineups\.access: GET /v1/lineups ")


def requests_by_pid(log: Path, offset: int) -> dict[int, int]:
    counts: dict[int, int] = {}
    with log.open("rb") as handle:
        handle.seek(offset)
        for line in handle.read().decode("utf-8", "replace").splitlines():
            match = _ACCESS.search(line)
            if match:
                counts[int(match.group(1))] = counts.get(int(match.group(1)), 0) + 1
    return counts


# ---------------------------------------------------------------- one pass
def settle(pids: list[int], quiet: float = 0.05, longest: float = 60.0) -> float:
    """Wait until the server's processes use under `quiet` of a core over a second
    (the explorer is imported after /healthz answers); the seconds waited."""
    start = time.monotonic()
    while time.monotonic() - start < longest:
        before = sum(cpu_s(p) for p in pids)
        time.sleep(1.0)
        if sum(cpu_s(p) for p in pids) - before < quiet:
            break
    return time.monotonic() - start


def one_pass(dataset, buyers, processes: int, asks: list, folder: Path, name: str, redis_url: str,
             worker_cpus: float | None = None) -> dict:
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(start_server(dataset, folder, name, "--processes", str(processes), "--redis",
                                                  redis_url))
        workers = server_pids(server.pid)[1:] if processes > 1 else []
        pids = [server.pid, *workers]
        if worker_cpus:  # each process its budget; PostgreSQL, wrk and the rest the remainder
            stack.enter_context(cpu_budget(pids, worker_cpus, name))
        settled = settle(pids)
        for _ in range(2):  # each buyer's first page, on new connections (any worker)
            for _, key, _ in buyers.keys.values():
                requests.get(server.base_url + path_of({"limit": "100"}), headers={"X-API-Key": key}, timeout=60)
        settle(pids, longest=10.0)
        offset = server.log_path.stat().st_size
        load_before = os.getloadavg()
        before = Snapshot.take(pids)
        result = load_pass(server.base_url, [(path_of(p), k) for _, k, p in asks])
        after = Snapshot.take(pids)
        load_after = os.getloadavg()
        served = requests_by_pid(server.log_path, offset)
    cpu = spent(before, after)
    return {
        "name": name, "processes": processes, "worker_cpus": worker_cpus, "questions": len(asks), "settle_s": settled,
        **dataclasses.asdict(result), "rate": result.rate,
        "load_before": load_before, "load_after": load_after, **cpu,
        "worker_requests": [served.get(p, 0) for p in (workers or [server.pid])],
        "worker_cpu_s": [cpu["server_cpu_s"].get(p, 0.0) for p in (workers or [server.pid])],
    }


def show(p: dict) -> str:
    workers = ", ".join(f"{n} req {c:.1f} s" for n, c in zip(p["worker_requests"], p["worker_cpu_s"]))
    others = p["machine_cpu_s"] - sum(p["server_cpu_s"].values()) - p["postgres_cpu_s"] - p["wrk_cpu_s"]
    return (f"{p['name']:>10} --processes {p['processes']}: {p['rate']:6.1f} pages/s  p50 {p['p50_ms']:6.1f} ms"
            f"  p99 {p['p99_ms']:7.1f} ms  {p['requests']} answers in {p['seconds']:.1f} s, errors {p['errors']}"
            f" | load {'/'.join(f'{x:.2f}' for x in p['load_before'])} -> {'/'.join(f'{x:.2f}' for x in p['load_after'])}"
            f", cores {p['machine_busy'] * 100:.0f}% busy | CPU s of {p['machine_cpu_s']:.1f}: workers [{workers}],"
            f" PostgreSQL {p['postgres_cpu_s']:.1f}, wrk {p['wrk_cpu_s']:.2f}, everything else {others:.1f}")


def passes(dataset, buyers, args, folder: Path) -> list[dict]:
    """An uncounted warm-up pass with one process, then `args.rounds` of 1 and 2, each its own questions."""
    plan = [("warm-up", 1, args.warmup)]
    for round_ in range(1, args.rounds + 1):
        plan += [(f"{n}p round {round_}", n, args.queries) for n in (1, 2)]
    asks = questions(buyers, sum(count for _, _, count in plan))
    done, at = [], 0
    for name, processes, count in plan:
        say("scaling", f"pass {name}: {count:,} questions, --processes {processes}")
        done.append(one_pass(dataset, buyers, processes, asks[at:at + count], folder, name.replace(" ", "-"),
                             args.redis, args.worker_cpus))
        at += count
        print(show(done[-1]), flush=True)
    return [p for p in done if p["name"] != "warm-up"]


def main(argv: list[str] | None = None) -> int:
    parser = command("scaling", __doc__)
    parser.add_argument("--records", type=int, default=250_000)
    parser.add_argument("--queries", type=int, default=1_500, help="distinct questions per pass")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of one pass with 1, then 2 processes")
    parser.add_argument("--warmup", type=int, default=500, help="questions of the uncounted first pass")
    where_pg = parser.add_mutually_exclusive_group()
    where_pg.add_argument("--pg", default=PG, help="PostgreSQL database (a schema is made in it and dropped)")
    where_pg.add_argument("--own-pg", action="store_true",
                          help="on a PostgreSQL server of the run's own set up as docs/deploying.md recommends")
    parser.add_argument("--redis", default=REDIS, help="Redis for the rate limits")
    parser.add_argument("--worker-cpus", type=float, metavar="CORES",
                        help="hold each server process to this much CPU (a cgroup each, as root): PostgreSQL, "
                             "wrk and the rest share what is left, as if PostgreSQL ran on cores of its own")
    args = parser.parse_args(argv)
    run = Run("scaling", args.results, argv)
    pg = f"the run's own ({describe_pg()})" if args.own_pg else "the machine's"
    say("scaling", f"{run.where}; {args.records:,} records, {args.queries:,} questions a pass, {args.rounds} rounds, "
        f"{CLIENTS} connections; PostgreSQL: {pg}")
    with contextlib.ExitStack() as stack:
        pg_url = stack.enter_context(own_server()) if args.own_pg else args.pg
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="lineups-scaling-")))
        schema = stack.enter_context(fresh_schema(pg_url, "bench_scaling_"))
        with stage("scaling", f"building a store of {args.records:,} records in {schema}"):
            dataset = build_store(folder, args.records, db_url=pg_url, db_schema=schema)
        with stage("scaling", "adding the buyers and building their views"):
            buyers, views_s, kept = add_buyers(dataset)
        say("scaling", f"  {len(buyers.keys)} buyers, {kept['views']} views, {kept['rows']:,} kept rows, "
            f"{kept['bytes'] / 2**20:,.0f} MiB of tables and indexes, views in {views_s:.1f} s")
        with stage("scaling", "VACUUM ANALYZE of the schema's tables"):
            vacuum_analyze(pg_url, schema)
        counted = passes(dataset, buyers, args, folder)
    ones, twos = ([p["rate"] for p in counted if p["processes"] == n] for n in (1, 2))
    ratio = statistics.median(twos) / statistics.median(ones)
    rounds = ", ".join(f"{b / a:.2f}x" for a, b in zip(ones, twos))
    print(f"median pages/s: 1 process {statistics.median(ones):.1f}, 2 processes {statistics.median(twos):.1f}: "
          f"{ratio:.2f}x (rounds: {rounds}); target >= {TARGET}x: {'met' if ratio >= TARGET else 'MISSED'}", flush=True)
    budget = f", each server process held to {args.worker_cpus:g} of a core" if args.worker_cpus else ""
    section = "PostgreSQL processes"
    figures = [
        Figure("scaling.one", section, f"one server process: distinct first pages/s{budget}", "req/s", ones),
        Figure("scaling.two", section, f"two server processes: distinct first pages/s{budget}", "req/s", twos),
        Figure("scaling.ratio", section, f"two processes over one{budget}", "×", [ratio], Target(">=", TARGET)),
    ]
    store = ("postgresql-own" if args.own_pg else "postgresql") + (f"-cpus{args.worker_cpus:g}" if args.worker_cpus else "")
    run.save(figures, dataset.records, store)
    return 0
