"""The rate limit shared by several server processes, in Redis (contract C5).

One atomic Lua script per request keeps a sliding log per client in a sorted set:
it drops entries older than the window, admits the request when fewer than `limit`
remain (adding it, and refreshing the key's expiry so that no key is left without
one), and otherwise says how long until the oldest entry leaves the window. The time
is Redis's own clock, so every process and machine sees the same window.

If Redis cannot be reached, the server keeps serving: it falls back to a per-process
`MemoryLimiter`, logs the fault (once per outage), and tries Redis again after a few
seconds. During an outage a key may therefore get up to `limit` requests per process
— the documented price of not refusing paying customers because a cache is down.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
import uuid

import redis

from api.ratelimit import DEFAULT_LIMIT, DEFAULT_WINDOW, Hit, MemoryLimiter

log = logging.getLogger("lineups.ratelimit")

_SCRIPT = """
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window_us = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window_us)
local count = redis.call('ZCARD', key)
local ttl_ms = math.ceil(window_us / 1000)
if count < limit then
  redis.call('ZADD', key, now, ARGV[3])
  redis.call('PEXPIRE', key, ttl_ms)
  return {1, limit - count - 1, 0}
end
local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
redis.call('PEXPIRE', key, ttl_ms)
return {0, 0, tonumber(oldest[2]) + window_us - now}
"""


class RedisLimiter:
    """`Limiter` over Redis, with a per-process fallback while Redis is down."""

    #: Seconds to wait before trying Redis again after a failure.
    RETRY_AFTER_FAULT = 5.0

    def __init__(
        self,
        url: str,
        limit: int = DEFAULT_LIMIT,
        window: float = DEFAULT_WINDOW,
        prefix: str = "lineups:rl:",
        socket_timeout: float = 0.5,
    ):
        self.limit = limit
        self.window = window
        self.prefix = prefix
        self._client = redis.Redis.from_url(
            url, socket_timeout=socket_timeout, socket_connect_timeout=socket_timeout
        )
        self._script = self._client.register_script(_SCRIPT)
        self._fallback = MemoryLimiter(limit, window)
        self._lock = threading.Lock()
        self._down_until = 0.0
        self._down = False
        self._answered = 0.0  # monotonic time of the last call Redis answered

    def hit(self, key: str) -> Hit:
        """Count one request of `key` (an API key, link id or client address)."""
        began = time.monotonic()
        if began < self._down_until:
            return self._fallback.hit(key)
        try:
            allowed, remaining, wait_us = self._script(
                keys=[self.prefix + _digest(key)],
                args=[self.limit, int(self.window * 1_000_000), uuid.uuid4().hex],
            )
        except redis.RedisError as exc:
            self._fault(exc, began)
            return self._fallback.hit(key)
        with self._lock:
            self._answered = time.monotonic()
            back, self._down = self._down, False
        if back:
            log.warning("Redis answers again: the rate limit is shared across processes again")
        if allowed:
            return Hit(True, int(remaining), 0)
        return Hit(False, 0, min(max(1, math.ceil(int(wait_us) / 1_000_000)), math.ceil(self.window)))

    def _fault(self, exc: Exception, began: float) -> None:
        """Note an outage, unless the failed call is a straggler: one begun before
        Redis answered another call (a connection tried while Redis was still
        starting, say), which says nothing about Redis now."""
        with self._lock:
            if began < self._answered:
                return
            self._down_until = time.monotonic() + self.RETRY_AFTER_FAULT
            first = not self._down
            self._down = True
        if first:
            log.error("Redis is unreachable (%s): rate limits fall back to per-process counts", type(exc).__name__)


def _digest(key: str) -> str:
    """Keys never reach Redis in clear (an API key is a secret)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]
