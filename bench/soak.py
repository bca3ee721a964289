"""Sustained load on `lineups serve`, every response checked against the contract
(issue 9), and the concurrent-exports check (issue 16 item 16).

    python -m bench soak                          # the full run: 50 clients, 5 minutes
    python -m bench soak --seconds 40 --warmup 10

On a demo store, `lineups serve --processes 2` (rate limits in a private `redis-server`
when one is installed), `clients` concurrent clients for `seconds` over a mix of
requests (`MIX`: filtered pages and cursors, CSV, sources, schemas, provenance, share
links, unknown paths, bad parameters and keys, other methods), each response's status
*and* body checked (`bench/soak_checks.py`), at the contract's 100 a minute per key:
the first `HOT_CLIENTS` clients share one key and so meet the limit. Then five
whole-result share-link exports stream while GET /v1/sources is timed
(`export_window`). It prints a JSON report and writes a result file; tests/reliability
run each check in a short mode and assert behaviour, the targets are judged here.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import json
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Callable, Iterator
from urllib.parse import urlencode, urlsplit

import requests
from sqlalchemy import select
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from bench.figures import Figure, Run, Target, command
from bench.load import percentiles
from bench.processes import Process, RssSampler, free_port, serve, server_rss_mib
from bench.soak_checks import Request, check
from bench.stores import build_demo
from store.access import accounts, links
from store.database.db import make_engine, make_sessionmaker, transaction
from store.database.schema import Subscription
from store.reference.taxonomy import default_taxonomy
from store.views.lineups import Lineups
from store.query import parse_query

KEYS_PER_CLIENT = 4
#: Clients 0 to HOT_CLIENTS - 1 send everything with one key.
HOT_CLIENTS = 8
#: Filters of /v1/lineups the load draws from (all valid for the demo data).
FILTERS: tuple[dict[str, str], ...] = (
    {}, {"port": "BRSSZ"}, {"commodity": "Soybeans"}, {"country": "Brazil"}, {"port_name": "san"},
    {"latest": "true"}, {"merge": "by_source"}, {"commodity": "Dry Bulk", "latest": "true"},
    {"from": "2026-11-01", "to": "2026-12-31"}, {"port": "nlrtm"}, {"commodity": "Coal,Iron Ore"},
    {"country": "Australia", "merge": "by_source"},
)
#: Requests the contract refuses with 400, and the parameter `details` must name.
BAD_PARAMS: tuple[tuple[str, str], ...] = (
    ("limit=0", "limit"), ("limit=501", "limit"), ("limit=ten", "limit"), ("port=X1", "port"),
    ("colour=red", "colour"), ("limit=5&limit=6", "limit"), ("from=2026-12-10&to=2026-12-01", "from"),
    ("commodity=Unobtainium", "commodity"), ("cursor=not-a-cursor", "cursor"), ("latest=maybe", "latest"),
    ("merge=some", "merge"), ("format=xml", "format"), ("source=nope", "source"), ("from=2026-13-01", "from"),
)
#: (kind, weight) of the mix.
MIX: tuple[tuple[str, int], ...] = (
    ("lineups", 18), ("cursor", 14), ("csv", 10), ("sources", 10), ("schema", 5), ("schema_forbidden", 2),
    ("provenance", 8), ("share", 4), ("share_revoked", 2), ("not_found", 7), ("bad_param", 10),
    ("bad_key", 5), ("method", 2), ("healthz", 3),
)


# ---------------------------------------------------------------- what the load needs
@dataclasses.dataclass(frozen=True)
class Plan:
    """Keys, ids and links of a store with the demo data, for the load."""

    keys: tuple[str, ...]
    feed_ids: tuple[str, ...]
    cancelled_feed_id: str
    row_ids: tuple[str, ...]
    share_paths: tuple[str, ...]
    revoked_share_path: str


def prepare(sessions, secrets: tuple[str, ...], keys: int) -> Plan:
    """Make `keys` API keys of the demo buyer, five narrow share links and a revoked
    one, and read the buyer's feed ids and some row ids, straight through the store
    (the same functions as `lineups key create` and `lineups link create`)."""
    with transaction(sessions) as session:
        buyer = accounts.find_buyer(session, "Demo Buyer")
        made = [accounts.create_key(session, buyer)[0] for _ in range(keys)]
        entitled = sorted(e.feed.id for e in accounts.entitlements(session, buyer.id))
        cancelled = session.scalars(select(Subscription.feed_id).where(
            Subscription.buyer_id == buyer.id, Subscription.status == "cancelled")).first()
        share = [
            links.url_for("", links.create_link(session, buyer, args, secrets)[1])
            for args in ({"port": ["BRSSZ"], "commodity": ["Soybeans"]}, {"port": ["NLRTM"]},
                         {"commodity": ["Iron Ore"], "latest": ["true"]}, {"country": ["Argentina"]},
                         {"port": ["SGSIN"], "merge": ["by_source"]})
        ]
        revoked, token = links.create_link(session, buyer, {"port": ["BRSSZ"]}, secrets)
        links.revoke_link(session, revoked)
        buyer_id = buyer.id
    # Read once the keys and links are committed (the view may be built: a write).
    query = parse_query({}, default_taxonomy().parse_filter)[0]
    rows = Lineups(sessions).frame(buyer_id, query)
    row_ids = tuple(rows["id"].iloc[:: max(len(rows) // 40, 1)].astype(str))[:40]
    return Plan(tuple(made), tuple(entitled), cancelled, row_ids, tuple(share), links.url_for("", token))


# ---------------------------------------------------------------- the clients
def keys_for(clients: int) -> int:
    """How many keys `clients` clients use."""
    return 1 + max(clients - HOT_CLIENTS, 1) * KEYS_PER_CLIENT


class Client:
    """One client of the mix: its own keys, random stream and cursor walk."""

    def __init__(self, number: int, plan: Plan, seed: int):
        self.random = random.Random(seed * 1000 + number)
        if number < HOT_CLIENTS:  # one key shared by these: it meets the limit (429)
            self.keys = plan.keys[:1]
        else:
            start = 1 + (number - HOT_CLIENTS) * KEYS_PER_CLIENT
            self.keys = plan.keys[start:start + KEYS_PER_CLIENT] or plan.keys[1:2]
        self.plan = plan
        self.turn = 0
        self.cursor: tuple[dict, str] | None = None  # (filters, next cursor)
        kinds, weights = zip(*MIX)
        self._kinds, self._weights = kinds, weights

    def key(self) -> str:
        self.turn += 1
        return self.keys[self.turn % len(self.keys)]

    def next_request(self) -> Request:
        kind = self.random.choices(self._kinds, self._weights)[0]
        return getattr(self, "_" + kind)()

    def _ok(self, kind: str, path: str, **kw) -> Request:
        return Request(kind, path, self.key(), allowed=frozenset({200, 429}), **kw)

    def _lineups(self) -> Request:
        filters = dict(self.random.choice(FILTERS))
        limit = self.random.choice((1, 10, 50, 100, 500))
        self.cursor = (filters, "")
        return self._ok("lineups", "/v1/lineups?" + urlencode({**filters, "limit": limit}), limit=limit)

    def _cursor(self) -> Request:
        if not self.cursor or not self.cursor[1]:
            return self._lineups()
        filters, cursor = self.cursor
        limit = self.random.choice((25, 100, 250))
        return self._ok("cursor", "/v1/lineups?" + urlencode({**filters, "limit": limit, "cursor": cursor}), limit=limit)

    def _csv(self) -> Request:
        filters = self.random.choice(FILTERS)
        return self._ok("csv", "/v1/lineups?" + urlencode({**filters, "format": "csv", "limit": self.random.choice((20, 200, 500))}))

    def _sources(self) -> Request:
        return self._ok("sources", "/v1/sources")

    def _schema(self) -> Request:
        return self._ok("schema", f"/v1/schema/{self.random.choice(self.plan.feed_ids)}")

    def _schema_forbidden(self) -> Request:
        request = self._ok("schema_forbidden", f"/v1/schema/{self.plan.cancelled_feed_id}")
        return dataclasses.replace(request, allowed=frozenset({403, 429}))

    def _provenance(self) -> Request:
        return self._ok("provenance", f"/v1/lineups/{self.random.choice(self.plan.row_ids)}/provenance")

    def _share(self) -> Request:
        return Request("share", self.random.choice(self.plan.share_paths), None, allowed=frozenset({200, 429}), valid_key=False)

    def _share_revoked(self) -> Request:
        return Request("share_revoked", self.plan.revoked_share_path, None, allowed=frozenset({401, 429}), valid_key=False)

    def _not_found(self) -> Request:
        path = self.random.choice((f"/v1/{uuid.uuid4().hex}", "/v1/lineups/no-such-row/provenance",
                                   f"/v1/schema/{uuid.uuid4()}", "/v2/lineups"))
        return Request("not_found", path, self.key(), allowed=frozenset({404, 429}))

    def _bad_param(self) -> Request:
        query, parameter = self.random.choice(BAD_PARAMS)
        return Request("bad_param", "/v1/lineups?" + query, self.key(), allowed=frozenset({400, 429}), parameter=parameter)

    def _bad_key(self) -> Request:
        key = self.random.choice(("lk_" + "0" * 32, "lk_123", None, "LK_" + "a" * 32))
        return Request("bad_key", "/v1/sources", key, allowed=frozenset({401, 429}), valid_key=False)

    def _method(self) -> Request:
        return Request("method", "/v1/sources", self.key(), method=self.random.choice(("POST", "DELETE", "PUT")),
                       allowed=frozenset({405, 429}))

    def _healthz(self) -> Request:
        return Request("healthz", "/healthz", None, allowed=frozenset({200}), valid_key=False)

    def saw(self, request: Request, status: int, body: bytes) -> None:
        """Keep the next cursor of a JSON page, to walk the pages."""
        if request.kind in ("lineups", "cursor") and status == 200 and self.cursor:
            self.cursor = (self.cursor[0], json.loads(body).get("next_cursor") or "")


@dataclasses.dataclass
class Outcome:
    began: float  # seconds since the load started
    kind: str
    status: int
    ms: float
    problem: str | None

    @property
    def ended(self) -> float:
        """Seconds since the load started when the answer came (or none did)."""
        return self.began + self.ms / 1000


@dataclasses.dataclass
class LoadReport:
    outcomes: list[Outcome]
    seconds: float
    clients: int

    def violations(self, ignore: Callable[[Outcome], bool] = lambda o: False) -> list[Outcome]:
        return [o for o in self.outcomes if o.problem and not ignore(o)]

    def summary(self, after: float = 0.0) -> dict:
        """Counts and latency percentiles of the outcomes that began after `after` s."""
        kept = [o for o in self.outcomes if o.began >= after]
        ms = sorted(o.ms for o in kept)
        by_kind: dict[str, list[float]] = collections.defaultdict(list)
        for o in kept:
            by_kind[o.kind].append(o.ms)
        problems = collections.Counter(o.problem for o in self.outcomes if o.problem)
        return {
            "clients": self.clients,
            "seconds": round(self.seconds, 1),
            "responses": len(self.outcomes),
            "rate_per_s": round(len(self.outcomes) / self.seconds, 1) if self.seconds else 0,
            "statuses": dict(sorted(collections.Counter(o.status for o in self.outcomes).items())),
            "violations": sum(problems.values()),
            "violation_kinds": dict(problems.most_common(10)),
            "latency_ms": percentiles(ms),
            "p99_ms_by_kind": {k: percentiles(sorted(v))["p99"] for k, v in sorted(by_kind.items())},
        }


async def run_load(base_url: str, plan: Plan, clients: int, seconds: float, seed: int = 1, timeout: float = 30.0,
                   started: float | None = None) -> LoadReport:
    """`clients` concurrent clients on `base_url` (127.0.0.1 only) for `seconds`, every
    response checked with `check`; the outcomes' times count from `started`
    (`time.monotonic()`, default the load's start), a caller's acts on that clock."""
    if urlsplit(base_url).hostname != "127.0.0.1":
        raise ValueError("the load only ever targets 127.0.0.1")
    http = AsyncHTTPClient(force_instance=True, max_clients=clients)
    outcomes: list[Outcome] = []
    started = time.monotonic() if started is None else started
    deadline = started + seconds

    async def one(client: Client) -> None:
        while time.monotonic() < deadline:
            request = client.next_request()
            headers = {"X-API-Key": request.key} if request.key else {}
            began = time.monotonic()
            try:
                response = await http.fetch(HTTPRequest(
                    base_url + request.path, method=request.method, headers=headers,
                    body=b"" if request.method in ("POST", "PUT") else None,
                    allow_nonstandard_methods=True, request_timeout=timeout, connect_timeout=10,
                ), raise_error=False)
                status, response_headers, body = response.code, response.headers, response.body or b""
            except (OSError, HTTPClientError) as exc:  # reset, refused, timed out: no response
                status, response_headers, body = 599, {}, repr(exc).encode()
            ms = (time.monotonic() - began) * 1000
            try:
                problem = check(request, status, response_headers, body)
            except Exception as exc:  # a body the checks could not even read
                problem = f"unreadable {request.kind} response: {type(exc).__name__}"
            if problem:
                problem = f"{request.kind}: {problem}"
            outcomes.append(Outcome(began - started, request.kind, status, ms, problem))
            client.saw(request, status, body)

    try:
        await asyncio.gather(*(one(Client(n, plan, seed)) for n in range(clients)))
    finally:
        http.close()
    return LoadReport(outcomes, time.monotonic() - started, clients)


# ---------------------------------------------------------------- memory
def memory_growth(samples: list[tuple[float, float]], warmup: float) -> dict:
    """RSS at the end of the warm-up, at the end, its peak after the warm-up, and the
    growth from the first to the last (in %), of `RssSampler.samples`."""
    after = [mib for t, mib in samples if t >= warmup]
    first, last = after[0], after[-1]
    return {"after_warmup_mib": round(first, 1), "end_mib": round(last, 1), "peak_mib": round(max(after), 1),
            "growth_pct": round(100 * (last - first) / first, 2)}


def soak(base_url: str, server_pid: int, plan: Plan, clients: int, seconds: float, warmup: float,
         seed: int = 1, warmup_responses: int = 0) -> dict:
    """The sustained-load check: the load's summary after the warm-up, its violations
    (warm-up included) and the server's memory. The warm-up lasts `warmup` seconds and,
    with `warmup_responses`, until that many answers came, at most half the run: a
    server's pools, caches and arenas fill by the requests answered, not by the clock."""
    with RssSampler(server_pid, max(1.0, min(10.0, seconds / 30)), server_rss_mib) as memory:
        report = asyncio.run(run_load(base_url, plan, clients, seconds, seed))
    if warmup_responses:
        answered = sorted(o.ended for o in report.outcomes)
        enough = answered[warmup_responses - 1] if len(answered) >= warmup_responses else report.seconds
        warmup = max(warmup, min(enough, report.seconds / 2))
    result = report.summary(after=warmup)
    result["warmup_s"] = round(warmup, 1)
    result["memory"] = memory_growth(memory.samples, warmup)
    result["first_violations"] = [dataclasses.asdict(o) for o in report.violations()[:10]]
    return result


# ---------------------------------------------------------------- the full run
@contextlib.contextmanager
def own_redis(folder: Path) -> Iterator[str | None]:
    """The URL of a private redis-server on a free port (never the machine's shared one)
    for the block; None when none is installed."""
    binary = shutil.which("redis-server")
    if binary is None:
        yield None
        return
    port = free_port()
    process = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
                                "no", "--dir", str(folder)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.kill()
        process.wait()


# ---------------------------------------------------------------- exports
#: Target: /v1/sources p99 while five whole-result exports stream.
EXPORT_PROBE_P99_TARGET_MS = 100


def export_window(base_url: str, share_urls: list[str], seconds: float, probe_keys: list[str],
                  probe_interval: float = 0.05, idle_seconds: float = 3.0) -> dict:
    """Stream each share link's CSV over and over for `seconds`, each by a `curl` of its
    own (not competing with the probe for this interpreter), while GET /v1/sources is
    timed every `probe_interval` s on a fresh connection over `probe_keys` (within the
    rate limit). Returns the exports' sizes and times, the probe's percentiles while
    every export was in flight, and those of `idle_seconds` of the probe alone before."""
    stop = threading.Event()
    in_flight = [0]
    lock = threading.Lock()
    exports: list[dict] = []

    def export(url: str) -> None:
        while not stop.is_set():
            with lock:
                in_flight[0] += 1
            try:
                done = subprocess.run(
                    ["curl", "--silent", "--show-error", "--output", "/dev/null", "--max-time", "600",
                     "--write-out", "%{http_code} %{size_download} %{time_total}", url],
                    capture_output=True, text=True)
            finally:
                with lock:
                    in_flight[0] -= 1
            status, size, total = (done.stdout.split() + ["0", "0", "0"])[:3]
            exports.append({"status": int(status), "mib": int(size) / 2**20, "seconds": float(total)})

    probes: list[tuple[float, int, bool]] = []
    bodies: set[bytes] = set()  # distinct bodies of the probe's 200s: one when all are right

    def probe(until: threading.Event, into: list) -> None:
        turn = 0
        while not until.is_set():
            turn += 1
            with lock:
                all_streaming = in_flight[0] == len(share_urls)
            began = time.monotonic()
            response = requests.get(f"{base_url}/v1/sources", timeout=30, headers={
                "X-API-Key": probe_keys[turn % len(probe_keys)], "Connection": "close"})
            ms = (time.monotonic() - began) * 1000
            with lock:
                all_streaming = all_streaming and in_flight[0] == len(share_urls)
            into.append((ms, response.status_code, all_streaming))
            if response.status_code == 200 and into is probes:
                bodies.add(response.content)
            until.wait(probe_interval)

    idle: list[tuple[float, int, bool]] = []
    quiet = threading.Event()
    threading.Timer(idle_seconds, quiet.set).start()
    probe(quiet, idle)  # the same probe with nothing else running: the machine's own noise
    threads = [threading.Thread(target=export, args=(url,)) for url in share_urls]
    threads.append(threading.Thread(target=probe, args=(stop, probes)))
    for thread in threads:
        thread.start()
    stop.wait(seconds)
    stop.set()
    for thread in threads:
        thread.join(600)
    during = sorted(ms for ms, _, both in probes if both)
    return {
        "exports": len(exports),
        "export_statuses": dict(collections.Counter(e["status"] for e in exports)),
        "export_mib": round(statistics.median(e["mib"] for e in exports), 1) if exports else None,
        "export_ms": percentiles(sorted(e["seconds"] * 1000 for e in exports)),
        "probes": len(probes),
        "probes_while_all_streaming": len(during),
        "probe_statuses": dict(collections.Counter(s for _, s, _ in probes)),
        "probe_distinct_bodies": len(bodies),
        "probe_ms_while_all_streaming": percentiles(during),
        "probe_ms_idle": percentiles(sorted(ms for ms, _, _ in idle)),
    }


def export_links(sessions, secrets: tuple[str, ...], base_url: str, count: int, keys: int = 20) -> tuple[list[str], list[str]]:
    """`count` share links of the demo buyer's whole result, and `keys` keys for the
    probe (20 keys: 2,000 requests a minute within the contract's limit)."""
    with transaction(sessions) as session:
        buyer = accounts.find_buyer(session, "Demo Buyer")
        urls = [links.url_for(base_url, links.create_link(session, buyer, {}, secrets)[1]) for _ in range(count)]
        made = [accounts.create_key(session, buyer)[0] for _ in range(keys)]
    return urls, made


def requests_rows(url: str) -> int:
    with requests.get(url, stream=True, timeout=600) as response:
        response.raise_for_status()
        return sum(chunk.count(b"\n") for chunk in response.iter_content(1 << 20)) - 1


# ---------------------------------------------------------------- the full run
def start(folder: Path, name: str, env: dict[str, str], processes: int, redis_url: str | None) -> Process:
    """`lineups serve --processes N` at the contract's rate limits, every worker's explorer
    built before the load (a fresh process builds it once quiet: a build in a lull of the
    run would read as memory growth)."""
    # Several processes are refused without Redis unless meant (issue 16 item 6).
    limits = ["--redis", redis_url] if redis_url else ["--per-process-limits"] if processes > 1 else []
    return serve(folder, name, env, "--processes", str(processes), *limits, explorers=processes)


def soak_run(args, folder: Path, redis_url: str | None) -> dict:
    (folder / "soak").mkdir(exist_ok=True)
    env, _ = build_demo(folder / "soak", args.records)
    engine = make_engine(env["LINEUPS_DB"])
    plan = prepare(make_sessionmaker(engine), (env["LINEUPS_SECRET"],), keys=keys_for(args.clients))
    engine.dispose()
    with start(folder, "soak", env, args.processes, redis_url) as server:
        result = soak(server.base_url, server.pid, plan, args.clients, args.seconds, args.warmup)
    result.update({"records": args.records, "processes": args.processes, "redis": bool(redis_url),
                   "keys": len(plan.keys), "rate_limit_per_key": 100})
    return result


def export_run(args, folder: Path) -> dict:
    """A demo store of `args.export_records`, `lineups serve`, five links' exports
    streaming for `args.export_seconds` while /v1/sources is timed."""
    (folder / "exports").mkdir(exist_ok=True)
    env, _ = build_demo(folder / "exports", args.export_records)
    engine = make_engine(env["LINEUPS_DB"])
    with start(folder, "exports", env, args.processes, None) as server:
        urls, keys = export_links(make_sessionmaker(engine), (env["LINEUPS_SECRET"],), server.base_url, 5)
        engine.dispose()
        warm = [requests_rows(url) for url in urls]  # every worker's view and the CSV columns warm
        result = export_window(server.base_url, urls, args.export_seconds, keys)
        result["warm_up_exports_rows"] = warm
        result["rss_mib_end"] = round(server_rss_mib(server.pid), 1)
    p99 = result["probe_ms_while_all_streaming"]["p99"]
    result.update({"records": args.export_records, "processes": args.processes,
                   "probe_p99_target_ms": EXPORT_PROBE_P99_TARGET_MS,
                   "meets_target": p99 is not None and p99 < EXPORT_PROBE_P99_TARGET_MS})
    return result


def figures_of(report: dict) -> list[Figure]:
    """The report's figures against their targets, for the result file."""
    run = report["soak"]
    section = f"Soak ({run['clients']} clients, {run['processes']} processes)"
    figures = [
        Figure("soak.violations", section, "responses outside the contract", "", [run["violations"]], Target("<=", 0)),
        Figure("soak.rate", section, "responses/s, every one checked", "req/s", [run["rate_per_s"]]),
        Figure("soak.p99", section, "p99 latency after the warm-up", "ms", [run["latency_ms"]["p99"]]),
        Figure("soak.memory", section, "server memory growth after the warm-up", "%", [run["memory"]["growth_pct"]],
               Target("<=", 10)),
    ]
    if "exports" in report and report["exports"]["probe_ms_while_all_streaming"]["p99"] is not None:
        figures.append(Figure("soak.exports.probe_p99", section, "GET /v1/sources p99 while five exports stream", "ms",
                              [report["exports"]["probe_ms_while_all_streaming"]["p99"]],
                              Target("<=", EXPORT_PROBE_P99_TARGET_MS)))
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = command("soak", __doc__)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--warmup", type=float, default=60, help="seconds of load before memory is compared")
    parser.add_argument("--records", type=int, default=5000, help="demo records for the soak (as `serve --demo`)")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--no-redis", action="store_true", help="per-process limits instead of a private Redis")
    parser.add_argument("--export-records", type=int, default=128_000,
                        help="demo records for the exports check (128,000 give about 100,000 merged rows); 0 skips it")
    parser.add_argument("--export-seconds", type=float, default=60)
    args = parser.parse_args(argv)
    run = Run("soak", args.results, argv)
    report: dict = {"date": run.measured, "cpus": os.cpu_count(), "load_average_before": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="lineups-soak-") as tmp, contextlib.ExitStack() as stack:
        redis = None if args.no_redis else stack.enter_context(own_redis(Path(tmp)))
        report["soak"] = soak_run(args, Path(tmp), redis)
        if args.export_records:
            report["exports"] = export_run(args, Path(tmp))
    report["load_average_after"] = os.getloadavg()
    print(json.dumps(report, indent=2))
    run.save(figures_of(report), args.records)
    soak_ok = report["soak"]["violations"] == 0 and report["soak"]["memory"]["growth_pct"] < 10
    return 0 if soak_ok and ("exports" not in report or report["exports"]["meets_target"]) else 1
