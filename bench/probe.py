"""Other buyers' pages while something happens (`bench/mixed.py`'s subscription change
and 100,000-record ingest, issue 15: "no other buyer's page is delayed by more than
200 ms meanwhile").
"""

from __future__ import annotations

import statistics
import threading
import time

import requests

from load import p99


class Probe:
    """Asks other buyers' pages every `interval` s in a thread while the block runs;
    `worst` is the slowest answer, `median` the typical one.

    With `quiet_rounds`, it first asks each page that many times before the block
    (nothing else running), and `worst_delay` is how much longer than its quickest
    quiet answer a page took during the block: what the targets call a page
    "delayed" by the change. A fresh server's first answer to a question reads cold
    pages (343 and 433 ms for two of these 50 questions at 1,000,000 records, with
    nothing else running, 2026-11-27): `worst` counts that, `worst_delay` does not."""

    def __init__(self, base_url: str, asks: list[tuple[str, str]], interval: float = 0.05, quiet_rounds: int = 0):
        self.base_url, self.asks, self.interval, self.quiet_rounds = base_url, asks, interval, quiet_rounds
        #: (index in `asks`, seconds) of each answer during the block
        self.answers: list[tuple[int, float]] = []
        #: index in `asks` -> its quickest answer before the block
        self.quiet: dict[int, float] = {}
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
        """The seconds of each answer during the block."""
        return [seconds for _, seconds in self.answers]

    @property
    def worst(self) -> float:
        return max(self.times, default=0.0)

    def _delays(self) -> list[float]:
        """Per answer during the block, how much longer it took than its page's quickest quiet answer."""
        return [seconds - self.quiet[i] for i, seconds in self.answers]

    @property
    def worst_delay(self) -> float:
        return max(self._delays(), default=0.0)

    def spread(self, limit_s: float = 0.2) -> str:
        """The median, p99 and how many answers took longer than `limit_s`: a note
        beside `worst`, one maximum that moves from run to run."""
        if not self.times:
            return "no pages asked"
        times = sorted(self.times)
        over = sum(t > limit_s for t in times)
        return (f"{len(times)} pages asked: median {statistics.median(times) * 1000:.0f} ms, "
                f"p99 {p99(times) * 1000:.0f} ms, {over} over {limit_s * 1000:.0f} ms")

    def delays(self, limit_s: float = 0.2) -> str:
        """How many answers were delayed by more than `limit_s`, beside `worst_delay`."""
        over = sum(delay > limit_s for delay in self._delays())
        return (f"{len(self.answers)} pages, each against its quickest of {self.quiet_rounds} quiet answers "
                f"before: {over} delayed over {limit_s * 1000:.0f} ms; slowest answer {self.worst * 1000:.0f} ms")
