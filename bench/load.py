"""HTTP load on 127.0.0.1, bounded in requests and in time.

`measure_load` runs GET requests over a list of paths, round robin, from a fixed number
of keep-alive connections, and reports requests/s and latency percentiles. It uses
Debian's `wrk` when installed (a Lua script sets the `X-API-Key` header, stops each
thread after its share of the request bound, and prints the figures as JSON), else a
small asyncio load generator in this process. Either way the load stops by itself
after `seconds` or `max_requests`, whichever comes first, and only ever targets the
127.0.0.1 address it is given.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

WRK = shutil.which("wrk")


@dataclasses.dataclass(frozen=True)
class LoadResult:
    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    #: Responses that were not 2xx/3xx, and socket errors or timeouts.
    errors: int
    tool: str

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def p99(ordered: list[float]) -> float:
    """The 99th percentile of sorted, non-empty `ordered` (the value below which 99% lie)."""
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def measure_load(
    base_url: str,
    paths: list[str],
    api_key: str | None,
    connections: int,
    seconds: float,
    max_requests: int,
) -> LoadResult:
    """Load `base_url` (which must be http://127.0.0.1:PORT) with GETs of `paths`."""
    if urlsplit(base_url).hostname != "127.0.0.1":
        raise ValueError("the load generator only targets 127.0.0.1")
    if WRK:
        return _wrk(base_url, paths, api_key, connections, seconds, max_requests)
    return asyncio.run(_python_load(base_url, paths, api_key, connections, seconds, max_requests))


# ---------------------------------------------------------------- wrk
_LUA = """
local paths = {%(paths)s}
local limit = %(limit)d
local counter, i = 0, 0
%(header)s
request = function()
  i = i + 1
  return wrk.format("GET", paths[(i - 1) %% #paths + 1])
end
response = function(status, headers, body)
  counter = counter + 1
  if counter >= limit then wrk.thread:stop() end
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests": %%d, "duration_us": %%d, "p50_us": %%d, "p99_us": %%d, "errors": %%d}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.status + e.timeout))
end
"""

#: wrk threads: one, so that the second core is left to the server under test.
WRK_THREADS = 1


def _lua_string(text: str) -> str:
    return json.dumps(text)  # a JSON string of ASCII is a valid Lua string literal


def _wrk(base_url, paths, api_key, connections, seconds, max_requests) -> LoadResult:
    header = f'wrk.headers["X-API-Key"] = {_lua_string(api_key)}' if api_key else ""
    script = _LUA % {
        "paths": ", ".join(_lua_string(p) for p in paths),
        "limit": max(1, max_requests // WRK_THREADS),
        "header": header,
    }
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as handle:
        handle.write(script)
    try:
        command = [
            WRK, f"-t{WRK_THREADS}", f"-c{connections}", f"-d{max(1, round(seconds))}s",
            "--timeout", "10s", "-s", handle.name, base_url,
        ]
        out = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60, check=True).stdout
    finally:
        Path(handle.name).unlink()
    figures = json.loads([line for line in out.splitlines() if line.startswith("{")][-1])
    return LoadResult(
        requests=figures["requests"],
        seconds=figures["duration_us"] / 1e6,
        p50_ms=figures["p50_us"] / 1000,
        p99_ms=figures["p99_us"] / 1000,
        errors=figures["errors"],
        tool="wrk",
    )


# ---------------------------------------------------------------- asyncio fallback
async def _python_load(base_url, paths, api_key, connections, seconds, max_requests) -> LoadResult:
    parts = urlsplit(base_url)
    header = f"X-API-Key: {api_key}\r\n" if api_key else ""
    requests = [
        f"GET {p} HTTP/1.1\r\nHost: {parts.netloc}\r\n{header}\r\n".encode("ascii") for p in paths
    ]
    latencies: list[float] = []
    errors = 0
    sent = 0
    deadline = time.perf_counter() + seconds

    async def connection() -> None:
        nonlocal errors, sent
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        try:
            while sent < max_requests and time.perf_counter() < deadline:
                request = requests[sent % len(requests)]
                sent += 1
                start = time.perf_counter()
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                status = int(head.split(b" ", 2)[1])
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                await reader.readexactly(length)
                latencies.append(time.perf_counter() - start)
                errors += status >= 400
        finally:
            writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(connection() for _ in range(connections)))
    elapsed = time.perf_counter() - start
    ordered = sorted(latencies) or [0.0]
    return LoadResult(
        requests=len(latencies),
        seconds=elapsed,
        p50_ms=statistics.median(ordered) * 1000,
        p99_ms=p99(ordered) * 1000,
        errors=errors,
        tool="python asyncio",
    )
