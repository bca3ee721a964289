"""Request rate limits (contract C5): a rolling window of requests per client.

The API counts every request of an API key, error responses included, and refuses
the one that would exceed the limit with 429 RATE_LIMITED and `Retry-After`. Requests
without a valid key are counted per client address, so that keys cannot be
brute-forced. `Limiter` is the interface; `MemoryLimiter` keeps the counts in this
process. A shared (Redis) implementation for several server processes only has to
provide the same `hit`.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from typing import Callable, NamedTuple, Protocol

#: C5: 100 requests per rolling 60 seconds.
DEFAULT_LIMIT = 100
DEFAULT_WINDOW = 60.0


class Hit(NamedTuple):
    """The outcome of counting one request."""

    allowed: bool
    #: Requests still admitted in the current window after this one.
    remaining: int
    #: Whole seconds until a request will be admitted again (0 when allowed).
    retry_after: int


class Limiter(Protocol):
    """What the API needs from a rate limiter."""

    limit: int
    window: float

    def hit(self, key: str) -> Hit:
        """Count a request of `key` if the window admits it, and say so."""
        ...


class MemoryLimiter:
    """A sliding log per key: the times of the admitted requests of the last window.

    Refused requests are not logged, so a client that keeps knocking is admitted again
    as soon as its oldest request leaves the window. Thread-safe."""

    #: Sweep keys that went quiet after this many hits, so memory stays bounded.
    SWEEP_EVERY = 10_000
    #: Keys counted at most (issue 16 item 5: client addresses are many); beyond, the
    #: key with the oldest last request is forgotten (it starts a fresh window).
    MAX_KEYS = 100_000
    #: `hit` never waits on I/O: the API may call it on the event loop.
    blocking = False

    def __init__(
        self,
        limit: int = DEFAULT_LIMIT,
        window: float = DEFAULT_WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ):
        if limit < 1 or window <= 0:
            raise ValueError("a rate limit needs limit >= 1 and window > 0")
        self.limit = limit
        self.window = window
        self._clock = clock
        self._lock = threading.Lock()
        self._log: dict[str, deque[float]] = {}
        self._hits = 0

    def hit(self, key: str) -> Hit:
        now = self._clock()
        with self._lock:
            self._hits += 1
            if self._hits % self.SWEEP_EVERY == 0:
                self._sweep(now)
            times = self._log.pop(key, None)
            if times is None:
                times = deque()
                if len(self._log) >= self.MAX_KEYS:
                    self._make_room(now)
            self._log[key] = times  # the most recently used key last
            self._expire(times, now)
            if len(times) >= self.limit:
                wait = times[0] + self.window - now
                return Hit(False, 0, min(max(1, math.ceil(wait)), math.ceil(self.window)))
            times.append(now)
            return Hit(True, self.limit - len(times), 0)

    def _expire(self, times: deque[float], now: float) -> None:
        while times and times[0] <= now - self.window:
            times.popleft()

    def _make_room(self, now: float) -> None:
        self._sweep(now)
        while len(self._log) >= self.MAX_KEYS:
            del self._log[next(iter(self._log))]

    def _sweep(self, now: float) -> None:
        for key in list(self._log):
            self._expire(self._log[key], now)
            if not self._log[key]:
                del self._log[key]
