"""Figures measured against server processes the benchmark starts: warm /v1/lineups
pages against the ceiling (a bare Tornado handler with a body of the same size), CSV
exports through share links, and the server's memory.

The service is `lineups serve` over the bench store on a free 127.0.0.1 port, with a
rate limit high enough for the load (`LINEUPS_RATE_LIMIT`) and a share-link ceiling
above the whole result (`LINEUPS_SHARE_CEILING`), so that one link can export it all.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

import requests
from dataset import Dataset
from figures import Figure, Target, missing
from load import LoadResult, measure_load
from processes import Process, RssSampler, free_port, rss_mib

from store.views.query import LineupQuery

#: Requests per key per minute for the bench server: no request of the load is refused.
RATE_LIMIT = 1_000_000_000
PAGE_ROWS = 100


def lineups_command() -> list[str]:
    """The `lineups` console script of this interpreter's environment."""
    script = Path(sys.executable).with_name("lineups")
    return [str(script)] if script.exists() else [sys.executable, "-m", "cli"]


#: What `lineups serve` logs once a worker has built its explorer (cli/serve.py): a
#: fresh process builds it once its API is quiet, so a figure of the whole server
#: (its memory, or a pass that must not meet the build) waits for this first.
EXPLORER_READY = "The explorer is ready"


def start_service(dataset: Dataset, folder: Path) -> Process:
    """`lineups serve` over the bench store; started, answering /healthz, and its
    explorer built (`EXPLORER_READY`)."""
    port = free_port()
    env = {
        "LINEUPS_RATE_LIMIT": str(RATE_LIMIT),
        "LINEUPS_SHARE_CEILING": str(max(dataset.records * 2, 100_000)),
        "LINEUPS_BASE_URL": f"http://127.0.0.1:{port}",
    }
    command = [*lineups_command(), "serve", "--db", dataset.db_url, "--host", "127.0.0.1", "--port", str(port)]
    return Process(command, port, folder / "serve.log", env).start("/healthz").wait_for_log(EXPLORER_READY)


@dataclasses.dataclass
class Warm:
    """The warmed service: the page paths the load walks, a page body, timings."""

    paths: list[str]
    body: bytes
    first_query_s: float
    rate_limit: int | None


def warm_pages(server: Process, api_key: str, pages: int) -> Warm:
    """Walk `pages` pages of /v1/lineups (the first request merges the whole store),
    keeping each page's path, so that the load requests warm, cursored pages."""
    http = requests.Session()
    http.headers["X-API-Key"] = api_key
    path = f"/v1/lineups?limit={PAGE_ROWS}"
    paths, body, first = [], b"", 0.0
    for number in range(pages):
        start = time.perf_counter()
        response = http.get(server.base_url + path, timeout=600)
        response.raise_for_status()
        if number == 0:
            first, body = time.perf_counter() - start, response.content
            limit = response.headers.get("X-RateLimit-Limit")
        paths.append(path)
        cursor = response.json()["next_cursor"]
        if cursor is None:
            break
        path = f"/v1/lineups?{urlencode({'limit': PAGE_ROWS, 'cursor': cursor})}"
    return Warm(paths, body, first, int(limit) if limit else None)


def start_ceiling(body: bytes, folder: Path) -> Process:
    """The ceiling (`bench/ceiling.py`) on a free 127.0.0.1 port, answering `body`."""
    body_file = folder / "ceiling-body.json"
    body_file.write_bytes(body)
    port = free_port()
    command = [sys.executable, str(Path(__file__).with_name("ceiling.py")), str(port), str(body_file)]
    return Process(command, port, folder / "ceiling.log").start("/")


def api_figures(
    server: Process, api_key: str, warm: Warm, folder: Path, runs: int, seconds: float, connections: int
) -> tuple[list[Figure], list[LoadResult], list[LoadResult]]:
    """Requests/s, p50 and p99 of warm pages under `connections` connections, against
    the ceiling, measured alternately `runs` times, and the server's RSS after each.
    Returns the figures and the ceiling's and the service's load results."""
    bound = int(seconds * 20_000)
    service, ceiling, rss = [], [], []
    with start_ceiling(warm.body, folder) as bare:
        for _ in range(runs):
            ceiling.append(measure_load(bare.base_url, ["/v1/lineups"], None, connections, seconds, bound))
            service.append(measure_load(server.base_url, warm.paths, api_key, connections, seconds, bound))
            rss.append(rss_mib(server.pid))
    top_rate = statistics.median(r.rate for r in ceiling)
    top_p50 = statistics.median(r.p50_ms for r in ceiling)
    top_p99 = statistics.median(r.p99_ms for r in ceiling)
    what = f"warm /v1/lineups pages of {PAGE_ROWS} rows ({len(warm.body):,} bytes), {connections} connections"
    bare_label = "bare Tornado handler, pre-serialised body of the same size"
    errors = sum(r.errors for r in service)
    note = f"{len(warm.paths)} distinct cursored pages, round robin; load by {service[0].tool}"
    if errors:
        note += f"; {errors} error responses or socket errors (rate limit seen: {warm.rate_limit})"
    return [
        Figure("api.rate", "API page", what, "req/s", [r.rate for r in service],
               Target(">=", 0.5 * top_rate, f"≥ 50% of the ceiling ({0.5 * top_rate:,.0f})"),
               (bare_label, top_rate), note),
        Figure("api.p50", "API page", "p50 latency", "ms", [r.p50_ms for r in service], None, (bare_label, top_p50)),
        Figure("api.p99", "API page", "p99 latency", "ms", [r.p99_ms for r in service],
               Target("<=", 3 * top_p99, f"≤ 3× the ceiling's ({3 * top_p99:.1f})"), (bare_label, top_p99)),
        Figure("api.ceiling.rate", "API page", f"ceiling: {bare_label}", "req/s", [r.rate for r in ceiling]),
        Figure("api.ceiling.p99", "API page", "ceiling: p99 latency", "ms", [r.p99_ms for r in ceiling]),
        Figure("memory.cached", "Server memory", "server RSS after each load run",
               "MiB", rss, Target("<=", 1.5 * 1024)),
    ], ceiling, service


def create_link(dataset: Dataset, server: Process, query: LineupQuery) -> str:
    """The URL of a new share link of the bench buyer for `query` (`lineups link
    create BUYER QUERY --json`)."""
    command = [
        *lineups_command(), "link", "create", dataset.buyer_name, urlencode(query.to_params()),
        "--json", "--db", dataset.db_url, "--base-url", server.base_url,
    ]
    out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=120).stdout
    return json.loads(out)["url"]


def fetch_csv(url: str) -> tuple[int, float, int]:
    """(status, seconds to the last byte, CSV data rows) of a streamed GET."""
    start = time.perf_counter()
    lines = 0
    with requests.get(url, stream=True, timeout=600) as response:
        for chunk in response.iter_content(1 << 20):
            lines += chunk.count(b"\n")
        status = response.status_code
    return status, time.perf_counter() - start, max(lines - 1, 0)


def export_figure(
    id: str, label: str, url: str, pid: int, runs: int, target: Target, reference: tuple[str, float] | None
) -> list[Figure]:
    """Rows/s of a share link's streamed CSV, and the server's RSS growth during it."""
    rates, growth, rows = [], [], 0
    for _ in range(runs):
        with RssSampler(pid) as memory:
            status, seconds, rows = fetch_csv(url)
        if status == 404:
            return [missing(id, "Exports", label, "rows/s", "GET /v1/share/{token} is not served yet (404)", target)]
        if status != 200:
            return [missing(id, "Exports", label, "rows/s", f"the share link answered {status}", target)]
        rates.append(rows / seconds)
        growth.append(memory.peak - memory.first)
    note = (
        f"first run {rates[0]:,.0f} rows/s, RSS +{growth[0]:.0f} MiB; every run writes the CSV afresh, a block "
        "of rows at a time (`store.views.csvtext`): nothing of an export is kept"
    )
    return [
        Figure(id, "Exports", f"{label} ({rows:,} rows)", "rows/s", rates, target, reference, note),
        Figure(f"{id}.first", "Exports", f"{label}: first export of the result", "rows/s", rates[:1], target),
        Figure(f"{id}.memory", "Exports", f"{label}: server RSS growth while streaming", "MiB", growth,
               Target("<=", 128, "flat (≤ 128)")),
    ]
