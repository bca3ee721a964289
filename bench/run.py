"""One command that measures the lineup service against its targets, ceilings and
baselines (issue 8), and writes `docs/benchmarks.md` with a chart:

    .venv/bin/python bench/run.py [--quick] [--records N] [--runs R] [--seconds S] [--pg URL] [--out docs/benchmarks.md]

In one run, on a store of `--records` records (default 1,000,000; `--quick`: 20,000
and shorter loads, under a minute):

1. the headline, the mixed workload of real use (`bench/mixed.py`): 7 buyers on
   different subscriptions, 1,500 distinct filtered first pages in both merge modes
   from 4 clients against a fresh `lineups serve`, a subscription change and a
   100,000-record ingest under load, `--runs` 1,000-record daily updates (each a
   different change in a fresh process), the server's memory; beside Datasette over
   the same records and filters;
2. ingest rows/s of a CSV into SQLite (and PostgreSQL when it answers), next to a bare
   executemany (`bench/ingest_bench.py`);
3. the cold merge against a straightforward pandas merge, and its peak memory
   (`bench/merge_bench.py`): what building a view costs;
4. one buyer walking the pages of one query under 32 connections against a bare
   Tornado ceiling (a footnote: the same question again);
5. the round trip of one page on one connection (the page's server time);
6. CSV exports through share links (the whole store, and ~100,000 rows), with the
   server's memory while it streams;
7. the explorer in headless Chromium on the demo data: first view after login and
   filter changes (`bench/explorer_figures.py`; not in `--quick`, whose run is part of
   the test suite, which runs the same browser test anyway).

Load generators are bounded in requests and time and target only 127.0.0.1. Every
process the bench starts, it stops.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import engine_figures  # noqa: E402
import explorer_figures  # noqa: E402
import mixed  # noqa: E402
import page_latency  # noqa: E402
import server_figures  # noqa: E402
from dataset import build_store  # noqa: E402
from figures import Figure, Target  # noqa: E402
from load import WRK  # noqa: E402
from report import write_report  # noqa: E402

from store.views.query import LineupQuery  # noqa: E402

DEFAULT_PG = os.environ.get("LINEUPS_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
SHARE_ROWS = 100_000


@dataclasses.dataclass(frozen=True)
class Config:
    records: int
    runs: int
    #: Seconds of each load run (ceiling and service alternate).
    load_seconds: float
    #: Distinct cursored pages the load walks.
    pages: int
    share_rows: int
    pg_url: str | None
    quick: bool
    connections: int = 32
    #: Seconds of each run of the page's server time (ceiling and service alternate).
    page_seconds: float = page_latency.PAGE_SECONDS
    #: Distinct questions of the mixed workload, and the rows of its ingest under load.
    questions: int = 1_500
    ingest_rows: int = 100_000


def config(args: argparse.Namespace) -> Config:
    records = args.records or (20_000 if args.quick else 1_000_000)
    return Config(
        records=records,
        runs=args.runs or 3,
        load_seconds=args.seconds or (2 if args.quick else 10),
        pages=20 if args.quick else 200,
        share_rows=min(SHARE_ROWS, records // 10),
        pg_url=args.pg or None,
        quick=args.quick,
        questions=100 if args.quick else 1_500,
        ingest_rows=2_000 if args.quick else 100_000,
        page_seconds=args.seconds or page_latency.PAGE_SECONDS,
    )


def machine() -> str:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    model = platform.processor() or "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    load = os.getloadavg()[0]
    return (f"{os.cpu_count()} cores (nproc), {memory:.1f} GiB memory, {model}; load average {load:.2f} at the start; "
            f"{speed()}")


def speed() -> str:
    """How fast this machine is at the moment, in fixed tasks, so that a run's figures
    can be set beside another run's: on this kind of machine the same code's figures
    have moved by 15% from hour to hour, and by two to three times from one session's
    machine to the next (2026-11-28: the daily update at 1,000,000 records took 1.7-2.7 s
    in one session and 5.2-7.6 s in the next on the same code; building the 7 buyers'
    views 186-241 s against 555 s). The tasks, each the median of three rounds, ~1 s in
    all: a Python loop of 5,000,000 additions (the interpreter: most of a page's and a
    merge's time); 20,000 reads and 20,000 writes of 4 KiB at random places of a 64 MiB
    file in the page cache (a system call each, as SQLite reads and writes its pages: a
    daily update at 1,000,000 records makes ~300,000 and ~250,000 of them). On the slow
    machine of that evening the loop took 190-330 ms, a read 1.7-2.5 µs and a write
    5.8-15.3 µs."""
    def loop() -> float:
        start, total = time.perf_counter(), 0
        for i in range(5_000_000):
            total += i
        return time.perf_counter() - start

    with tempfile.TemporaryFile() as file:
        block = os.urandom(1 << 20)
        for _ in range(64):
            file.write(block)
        file.flush()
        places = [random.randrange(64 * 256) * 4096 for _ in range(20_000)]

        def calls(call, data) -> float:
            start = time.perf_counter()
            for place in places:
                call(file.fileno(), data, place)
            return (time.perf_counter() - start) / len(places)

        loops = statistics.median(loop() for _ in range(3))
        read = statistics.median(calls(os.pread, 4096) for _ in range(3))
        write = statistics.median(calls(os.pwrite, block[:4096]) for _ in range(3))
    return (f"speed: a Python loop of 5M additions {loops * 1000:,.0f} ms, a 4 KiB read {read * 1e6:.1f} µs and "
            f"write {write * 1e6:.1f} µs in the page cache")


def versions() -> str:
    names = ("pandas", "numpy", "tornado", "sqlalchemy")
    parts = [f"Python {platform.python_version()}", *(f"{n} {version(n)}" for n in names)]
    if WRK:
        head = subprocess.run([WRK, "-v"], capture_output=True, text=True).stdout.split()
        parts.append(" ".join(head[:2]) if head else "wrk")
    return ", ".join(parts)


def measure(cfg: Config, folder: Path) -> tuple[list[Figure], tuple | None]:
    """Every figure of the run, and the load results for the chart."""
    step = _Steps()
    figures = step("ingest", engine_figures.ingest_figures, cfg.records, cfg.runs, cfg.pg_url)
    figures += step("cold merge", engine_figures.merge_figures, cfg.records, cfg.runs)
    dataset = step("building the service store", build_store, folder, cfg.records)
    # The headline: many buyers, distinct questions, beside Datasette (issue 15).
    mixed_figures, _ = step("mixed workload", mixed.mixed_figures, dataset, folder, cfg.questions, not cfg.quick,
                            cfg.ingest_rows, daily_runs=cfg.runs)
    figures = mixed_figures + figures
    export_rows, render_rate = step("CSV renderer reference", engine_figures.render_reference, dataset, cfg.runs)
    share_query, share_rows = step("choosing the share link", engine_figures.share_query, dataset, cfg.share_rows)
    with server_figures.start_service(dataset, folder) as server:
        warm = step("asking the pages once", server_figures.warm_pages, server, dataset.api_key, cfg.pages)
        api, ceiling, loads = step("API load", server_figures.api_figures, server, dataset.api_key, warm, folder,
                                   cfg.runs, cfg.load_seconds, cfg.connections)
        figures += api
        figures += step("page server time", page_latency.page_time_figures, server, dataset.api_key, warm.paths,
                        warm.body, folder, cfg.runs, cfg.page_seconds)
        reference = ("CSV renderer alone, in process", render_rate)
        whole_url = step("share link (whole store)", server_figures.create_link, dataset, server, LineupQuery())
        figures += step("export (whole store)", server_figures.export_figure, "export.whole",
                        "CSV export of the whole store through a share link", whole_url, server.pid, cfg.runs,
                        Target(">=", 300_000), reference)
        share_url = step("share link", server_figures.create_link, dataset, server, share_query)
        figures += step("export (share link)", server_figures.export_figure, "export.share",
                        f"share link of ~{cfg.share_rows:,} rows (`from`/`to` of the first days)", share_url,
                        server.pid, cfg.runs, Target(">=", 200_000), reference)
    print(f"[bench] whole result {export_rows:,} rows; share link {share_rows:,} rows", flush=True)
    if not cfg.quick:
        figures += step("explorer in Chromium", explorer_figures.explorer_figures, folder, cfg.runs)
    return figures, (ceiling, loads)


class _Steps:
    """Runs a step and says on stderr what it does and how long it took."""

    def __call__(self, name: str, function, *args, **kwargs):
        print(f"[bench] {name} …", file=sys.stderr, flush=True)
        start = time.perf_counter()
        result = function(*args, **kwargs)
        print(f"[bench] {name}: {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
        return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="about 20,000 records and short loads (a few minutes)")
    parser.add_argument("--records", type=int, default=None, help="store size (default 1,000,000; quick 20,000)")
    parser.add_argument("--runs", type=int, default=None, help="repetitions of each figure (default 3)")
    parser.add_argument("--seconds", type=float, default=None,
                        help="seconds of each load and page-time run (default 10 and 3; quick 2 and 3)")
    parser.add_argument("--pg", default=DEFAULT_PG, help="PostgreSQL URL for the ingest figure ('' to skip)")
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks.md"), help="the report (Markdown)")
    args = parser.parse_args(argv)
    cfg = config(args)
    start = time.time()
    run = {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "records": cfg.records,
        "runs": cfg.runs,
        "quick": cfg.quick,
        "machine": machine(),
        "versions": versions(),
    }
    with tempfile.TemporaryDirectory(prefix="lineups-bench-") as tmp:
        figures, loads = measure(cfg, Path(tmp))
    run["seconds"] = time.time() - start
    write_report(args.out, figures, run, loads)
    for figure in figures:
        value = "—" if figure.missing else f"{figure.median:,.3f}"
        print(f"{figure.id:24s} {value:>14s} {figure.unit:7s} {'' if figure.met is None else ('met' if figure.met else 'MISSED')}")
    print(f"[bench] wrote {args.out} in {run['seconds']:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
