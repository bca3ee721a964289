"""HTTP load on 127.0.0.1 with Debian's `wrk`, bounded in requests and in time, and a
probe of other buyers' pages while something happens.

- `load_pass`: each (path, key) once, a distinct question each, from a few keep-alive
  connections; it stops once all are answered (the mixed workload's pass);
- `Probe`: other buyers' pages asked every 50 ms in a thread while a block runs, and
  how much each was delayed against its quickest quiet answer before.

A Lua script sets the `X-API-Key` header and prints wrk's figures as JSON. Load only
ever targets the 127.0.0.1 address it is given.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import requests

WRK = shutil.which("wrk")
#: Concurrent connections of the mixed workload's pass.
CLIENTS = 4

_DONE = """
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests": %%d, "duration_us": %%d, "p50_us": %%d, "p99_us": %%d, "errors": %%d}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.status + e.timeout))
end
"""
#: Each request once; a marker file once all are answered.
_EACH_ONCE = """
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
""" + _DONE
@dataclasses.dataclass(frozen=True)
class LoadResult:
    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    #: Responses that were not 2xx/3xx, and socket errors or timeouts.
    errors: int
    tool: str = "wrk"

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def percentiles(ms: list[float]) -> dict:
    """p50, p90, p99 and max of sorted latencies, in ms."""
    if not ms:
        return {"p50": None, "p90": None, "p99": None, "max": None}
    pick = lambda q: round(ms[min(len(ms) - 1, int(q * len(ms)))], 1)  # noqa: E731
    return {"p50": pick(0.5), "p90": pick(0.9), "p99": pick(0.99), "max": round(ms[-1], 1)}


def _lua(text: str) -> str:
    return json.dumps(text)  # a JSON string of ASCII is a valid Lua string literal


def _wrk(base_url: str, script: str, connections: int, seconds: float, until: Path) -> LoadResult:
    """wrk with `script` (one thread: the second core is the server's), interrupted
    (SIGINT) once `until` exists, so that it reports the time it really ran, not its
    whole -d."""
    if not WRK:
        raise RuntimeError("wrk is needed (Debian's package wrk)")
    if urlsplit(base_url).hostname != "127.0.0.1":
        raise ValueError("the load generator only targets 127.0.0.1")
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as handle:
        handle.write(script)
    try:
        command = [WRK, "-t1", f"-c{connections}", f"-d{max(1, int(seconds))}s", "--timeout", "30s",
                   "-s", handle.name, base_url]
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        deadline = time.monotonic() + seconds + 5
        while proc.poll() is None and not until.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        out = proc.communicate(timeout=seconds + 60)[0]
    finally:
        Path(handle.name).unlink()
    figures = json.loads([line for line in out.splitlines() if line.startswith("{")][-1])
    return LoadResult(figures["requests"], figures["duration_us"] / 1e6, figures["p50_us"] / 1000,
                      figures["p99_us"] / 1000, figures["errors"])


def load_pass(base_url: str, asks: list[tuple[str, str]], connections: int = CLIENTS,
              seconds: float = 120.0) -> LoadResult:
    """Each (path, key) of `asks` once over `connections` keep-alive connections; stops
    once all are answered, or after `seconds`."""
    folder = Path(tempfile.mkdtemp(prefix="lineups-wrk-"))
    marker = folder / "done"
    script = _EACH_ONCE % {"requests": ", ".join(f"{{{_lua(p)}, {_lua(k)}}}" for p, k in asks), "marker": _lua(str(marker))}
    try:
        return _wrk(base_url, script, connections, seconds, marker)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class Probe:
    """Asks other buyers' pages every `interval` s in a thread while the block runs;
    `worst` is the slowest answer.

    With `quiet_rounds`, it first asks each page that many times before the block
    (nothing else running), and `worst_delay` is how much longer than its quickest quiet
    answer a page took during the block: what the targets call a page "delayed". A fresh
    server's first answer to a question reads cold pages: `worst` counts that,
    `worst_delay` does not."""

    def __init__(self, base_url: str, asks: list[tuple[str, str]], interval: float = 0.05, quiet_rounds: int = 0):
        self.base_url, self.asks, self.interval, self.quiet_rounds = base_url, asks, interval, quiet_rounds
        self.answers: list[tuple[int, float]] = []  # (index in `asks`, seconds) during the block
        self.quiet: dict[int, float] = {}  # index in `asks` -> its quickest answer before
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _ask(self, session: requests.Session, i: int) -> float:
        path, key = self.asks[i % len(self.asks)]
        start = time.perf_counter()
        session.get(self.base_url + path, headers={"X-API-Key": key}, timeout=60)
        return time.perf_counter() - start

    def _run(self) -> None:
        i = 0
        with requests.Session() as session:
            while not self._stop.is_set():
                self.answers.append((i % len(self.asks), self._ask(session, i)))
                i += 1
                self._stop.wait(self.interval)

    def __enter__(self) -> "Probe":
        with requests.Session() as session:
            for _ in range(self.quiet_rounds):
                for i in range(len(self.asks)):
                    seconds = self._ask(session, i)
                    self.quiet[i] = min(seconds, self.quiet.get(i, seconds))
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def times(self) -> list[float]:
        return [seconds for _, seconds in self.answers]

    @property
    def worst(self) -> float:
        return max(self.times, default=0.0)

    def _delays(self) -> list[float]:
        return [seconds - self.quiet[i] for i, seconds in self.answers]

    @property
    def worst_delay(self) -> float:
        return max(self._delays(), default=0.0)

    def spread(self, limit_s: float = 0.2) -> str:
        """The median, p99 and how many answers took longer than `limit_s`."""
        if not self.times:
            return "no pages asked"
        ms = percentiles(sorted(t * 1000 for t in self.times))
        over = sum(t > limit_s for t in self.times)
        return (f"{len(self.times)} pages asked: median {ms['p50']:.0f} ms, p99 {ms['p99']:.0f} ms, "
                f"{over} over {limit_s * 1000:.0f} ms")

    def delays(self, limit_s: float = 0.2) -> str:
        over = sum(delay > limit_s for delay in self._delays())
        return (f"{len(self.answers)} pages, each against its quickest of {self.quiet_rounds} quiet answers "
                f"before: {over} delayed over {limit_s * 1000:.0f} ms; slowest answer {self.worst * 1000:.0f} ms")
