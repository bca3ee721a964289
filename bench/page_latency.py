"""The server time of one warm page (issue 3: "a page of 100 rows from a warm cache
takes at most 5 ms of server time at 1,000,000 records").

Measured from outside, on one connection, so that no request waits behind another:
each round trip on 127.0.0.1 is the server's time for the page plus the loopback and
the load generator's own work, an upper bound of the server time. The same run's bare
Tornado handler (`ceiling.py`, a pre-serialised body of the same size) on one
connection is the reference: the part of the round trip that is not ours.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from figures import Figure, Target
from load import measure_load
from processes import Process
from server_figures import start_ceiling

PAGE_SECONDS = 3.0


def page_time_figures(server: Process, api_key: str, paths: list[str], body: bytes, folder: Path,
                      runs: int, seconds: float = PAGE_SECONDS) -> list[Figure]:
    """p50 and p99 round trip of warm cursored pages on one connection, against the
    ceiling on one connection, measured alternately `runs` times."""
    bound = int(seconds * 5_000)
    service, bare_runs = [], []
    with start_ceiling(body, folder) as bare:
        for _ in range(runs):
            bare_runs.append(measure_load(bare.base_url, ["/v1/lineups"], None, 1, seconds, bound))
            service.append(measure_load(server.base_url, paths, api_key, 1, seconds, bound))
    label = "bare Tornado handler on one connection"
    bare_p50 = statistics.median(r.p50_ms for r in bare_runs)
    bare_p99 = statistics.median(r.p99_ms for r in bare_runs)
    note = (f"{len(paths)} distinct cursored pages of one query on one connection, {service[0].tool}: "
            "each request's whole round trip on 127.0.0.1, an upper bound of the server's time")
    return [
        Figure("page.server_time_p50", "API page", "warm page of 100 rows, one connection: p50 round trip",
               "ms", [r.p50_ms for r in service], Target("<=", 5.0), (label, bare_p50), note),
        Figure("page.server_time_p99", "API page", "warm page of 100 rows, one connection: p99 round trip",
               "ms", [r.p99_ms for r in service], None, (label, bare_p99)),
    ]
