"""The concurrent-exports check of the soak (issue 9; issue 16 item 16): five share-link
exports of the whole result streaming, over and over, while GET /v1/sources is timed.
Its target (`EXPORT_PROBE_P99_TARGET_MS`) is judged in the full run's report and exit
status (`bench/soak.py`), never by a test; tests/reliability/test_exports.py runs it
short against a server it starts and asserts behaviour.
"""

from __future__ import annotations

import collections
import statistics
import subprocess
import threading
import time
from pathlib import Path

from soak import build_demo, percentiles, serve, server_rss_mib


#: Target: /v1/sources p99 while five whole-result exports stream (docs/benchmarks.md).
EXPORT_PROBE_P99_TARGET_MS = 100


def export_window(base_url: str, share_urls: list[str], seconds: float, probe_keys: list[str],
                  probe_interval: float = 0.05, idle_seconds: float = 3.0) -> dict:
    """Stream each share link's CSV over and over for `seconds`, each by its own
    `curl` process (so that reading 100,000-row bodies does not compete with the
    probe for this interpreter); meanwhile time GET /v1/sources every
    `probe_interval` s on a fresh connection, rotating over `probe_keys` so that the
    rate limit does not answer instead of the endpoint. Returns the exports' rows
    and times and the probe's latency percentiles, counting only the probes sent
    while every export was in flight, and those of `idle_seconds` of the probe alone
    before the exports start."""
    import requests

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


def export_run(args, folder: Path) -> dict:
    """The full run's exports check (`soak.main`): a demo store of `args.export_records`,
    `lineups serve`, five links' exports streaming for `args.export_seconds` while
    /v1/sources is timed; judged against `EXPORT_PROBE_P99_TARGET_MS`."""
    from store.database.db import make_engine, make_sessionmaker

    (folder / "exports").mkdir(exist_ok=True)
    db_url, secret = build_demo(folder / "exports", args.export_records)
    engine = make_engine(db_url)
    sessions = make_sessionmaker(engine)
    with serve(folder, "exports", db_url, secret, args.processes, None) as server:
        urls, keys = export_links(sessions, (secret,), server.base_url, 5)
        engine.dispose()
        warm = [requests_rows(url) for url in urls]  # every worker's cache, and the CSV columns, warm
        result = export_window(server.base_url, urls, args.export_seconds, keys)
        result["warm_up_exports_rows"] = warm
        result["rss_mib_end"] = round(server_rss_mib(server.pid), 1)
    result.update({"records": args.export_records, "processes": args.processes})
    p99 = result["probe_ms_while_all_streaming"]["p99"]
    result["probe_p99_target_ms"] = EXPORT_PROBE_P99_TARGET_MS
    result["meets_target"] = p99 is not None and p99 < EXPORT_PROBE_P99_TARGET_MS
    return result


def export_links(sessions, secrets: tuple[str, ...], base_url: str, count: int, keys: int = 20) -> tuple[list[str], list[str]]:
    """`count` share links of the demo buyer's whole result, and `keys` keys for the
    probe (20 keys: 2,000 requests a minute within the contract's limit)."""
    from store.access import accounts, links
    from store.database.db import transaction

    with transaction(sessions) as session:
        buyer = accounts.find_buyer(session, "Demo Buyer")
        urls = [links.url_for(base_url, links.create_link(session, buyer, {}, secrets)[1]) for _ in range(count)]
        made = [accounts.create_key(session, buyer)[0] for _ in range(keys)]
    return urls, made


def requests_rows(url: str) -> int:
    import requests

    with requests.get(url, stream=True, timeout=600) as response:
        response.raise_for_status()
        return sum(chunk.count(b"\n") for chunk in response.iter_content(1 << 20)) - 1
