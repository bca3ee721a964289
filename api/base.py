"""The handler every API endpoint derives from (contract C5).

`BaseHandler` owns what all endpoints share, so that the endpoints themselves only
parse, call the store and render:

- a request id on every response (`X-Request-Id`, generated here; a client's is
  ignored), named in the message of 500 errors and in the server log;
- `prepare()`: the `X-API-Key` check (in a worker thread), the rate limit, the
  method check (GET and HEAD only);
- `write_error()`: every failure becomes the seed's error body through
  `LineupsError.body()`, never a stack trace; unexpected exceptions are 500
  INTERNAL_ERROR and are logged with their traceback and the request id;
- `run()`: blocking store and merge work on the executor, with one session per
  request, closed when the request is done; `read()`: pure reads of data, each in a
  transaction of its own on a read replica when there is one (`store.db.Reads`).

Dependencies arrive through `initialize()` from the route table, never as globals.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import itertools
import logging
import os
import re
import threading
import time
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any, Callable

import pandas as pd
from sqlalchemy.orm import Session, sessionmaker
from tornado.ioloop import IOLoop
from tornado.web import HTTPError, RequestHandler

from api import render
from api.cursors import CursorCodec
from api.ratelimit import Hit, Limiter
from api.rowcache import RowCache
from store import accounts
from store.accounts import FeedVersion
from store.changes import change_stamp
from store.db import Reads
from store.errors import (
    Forbidden,
    InternalError,
    LineupsError,
    MethodNotAllowed,
    NotFound,
    RateLimited,
    Unauthorized,
    ValidationError,
)
from store.lineups import LineupService
from store.settings import Settings

log = logging.getLogger("lineups.api")
ALLOWED_METHODS = ("GET", "HEAD")
#: Threads per process that make the CSV blocks of exports, all exports together: one,
#: so that exports queue for it rather than crowd the event loop out of the GIL.
EXPORT_WORKERS = 1
#: `last_used_at` of a key is written at most this often (seconds) per process.
TOUCH_INTERVAL = 60.0
_SHARE_PATH = re.compile(r"^/v1/share/[^/?#]+")
#: Key-shaped text (C5: `lk_` and 32 hex digits; any case or length, typos included).
_KEY_LIKE = re.compile(r"(?<![0-9a-z])lk_[0-9a-z]+", re.IGNORECASE)
#: Token-shaped text (itsdangerous: base64url payload, a dot, a 27-character signature).
_TOKEN_LIKE = re.compile(r"\.?[\w-]+\.[\w-]{27}(?![\w-])", re.ASCII)


def text_args(arguments: dict[str, list[bytes]]) -> dict[str, list[str]]:
    """Tornado's query arguments (names as latin-1 text, values as bytes) as UTF-8
    text; a name or value that is not UTF-8 is 400."""
    args: dict[str, list[str]] = {}
    for raw_name, values in arguments.items():
        try:
            name = raw_name.encode("latin-1").decode("utf-8")
            args[name] = [v.decode("utf-8") for v in values]
        except UnicodeError:
            raise ValidationError.parameter(raw_name, "not valid UTF-8") from None
    return args


class RequestIds:
    """Request ids of 32 hex digits (`X-Request-Id`): a random 64-bit prefix per
    process, drawn again in a forked child, and a counter. Unique across the
    processes of a server and its restarts like `uuid4().hex`, without reading the
    system's random source on every request (an id names a request in the log; it
    is not a secret)."""

    def __init__(self) -> None:
        self._reseed()
        os.register_at_fork(after_in_child=self._reseed)

    def _reseed(self) -> None:
        self._prefix = os.urandom(8).hex()
        self._count = itertools.count()

    def __call__(self) -> str:
        return f"{self._prefix}{next(self._count) & 0xFFFFFFFFFFFFFFFF:016x}"


new_request_id = RequestIds()


#: How much lower the operating system schedules export threads than the rest of the
#: process (a nice increment; Linux schedules each thread on its own).
EXPORT_NICENESS = 10


def bulk_priority() -> None:
    """Run the calling thread at a lower CPU priority (`EXPORT_NICENESS`): an export
    is bulk work, and when the cores are busy the event loop and the other requests'
    threads should run first. Where a thread's priority cannot be set, nothing."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), EXPORT_NICENESS)
    except (AttributeError, OSError):  # not Linux, or not allowed
        pass


@dataclasses.dataclass(frozen=True)
class Dependencies:
    """What the handlers need; built once by `api.app.make_app`."""

    settings: Settings
    sessions: sessionmaker[Session]
    service: LineupService
    limiter: Limiter
    executor: Executor
    cursors: CursorCodec
    touches: "KeyTouches"
    rows: RowCache
    #: API keys' admissions, remembered while the store is unchanged (made from
    #: `sessions` when not given).
    admissions: accounts.Admissions | None = None
    #: Where pure reads go (`store.db.Reads`: read replicas, else the primary; made
    #: from `sessions` when not given).
    reads: Reads | None = None
    #: Threads that make CSV blocks of exports (C8, C9): few and apart from `executor`,
    #: so that long exports neither queue ahead of other requests' store work nor
    #: crowd the event loop out of the GIL (made when not given).
    exports: Executor | None = None
    #: `admissions.stamp` read at most once per turn of the event loop (made).
    turn_stamp: "TurnStamp | None" = None

    def __post_init__(self) -> None:
        if self.exports is None:
            exports = ThreadPoolExecutor(EXPORT_WORKERS, thread_name_prefix="lineups-export", initializer=bulk_priority)
            object.__setattr__(self, "exports", exports)
        if self.admissions is None:
            stamp = change_stamp(self.sessions.kw.get("bind"))
            object.__setattr__(self, "admissions", accounts.Admissions(stamp))
        if self.turn_stamp is None:
            object.__setattr__(self, "turn_stamp", TurnStamp(self.admissions.stamp))
        if self.reads is None:
            object.__setattr__(self, "reads", Reads(self.sessions))


class TurnStamp:
    """The store's change stamp (`store.changes.change_stamp`) as the event loop
    reads it: once per turn of the loop, shared by the requests admitted in that
    turn (reading SQLite's `PRAGMA data_version` was ~5% of a warm page's time).

    A remembered key admission is given while the stamp is unchanged, so a request
    sees the store as of the start of the loop's turn that admits it: a change
    committed before the request was sent is seen unless both fall within one turn
    (well under a millisecond idle, a few under load), the same as if the request
    had come a moment earlier. Call it on the event loop only."""

    def __init__(self, stamp: Callable[[], Any]):
        self._stamp = stamp
        self._value: Any = None
        self._fresh = False

    def __call__(self) -> Any:
        if not self._fresh:
            self._value = self._stamp()
            self._fresh = True
            # `call_soon` (not Tornado's `add_callback`, which also wakes the loop
            # through its pipe): runs at the start of the next turn.
            asyncio.get_running_loop().call_soon(self._expire)
        return self._value

    def _expire(self) -> None:
        self._fresh = False


class KeyTouches:
    """Throttles the `last_used_at` writes of API keys, so that a busy key does not
    turn every read into a write."""

    def __init__(self, interval: float = TOUCH_INTERVAL):
        self.interval = interval
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}

    def due(self, key_hash: str) -> bool:
        """True (and noted) when the key was not touched within the interval."""
        now = time.monotonic()
        with self._lock:
            if now - self._last.get(key_hash, -self.interval) < self.interval:
                return False
            self._last[key_hash] = now
            return True


class RequestSession:
    """One session per request: opened on first use in a worker thread, used by one
    thread at a time, closed after the request.

    Each step ends its transaction, which hands the connection back to the pool: a
    request waiting for a worker thread between two steps must not hold one, or a
    burst of more requests than the pool has connections leaves every thread waiting
    for a connection that only a waiting request can give back."""

    def __init__(self, factory: sessionmaker[Session]):
        self._factory = factory
        self._session: Session | None = None
        self._lock = threading.Lock()

    @property
    def opened(self) -> bool:
        return self._session is not None

    def run(self, work: Callable[..., Any], *args: Any) -> Any:
        with self._lock:
            if self._session is None:
                self._session = self._factory()
            try:
                result = work(self._session, *args)
            except BaseException:
                self._session.rollback()
                raise
            self._session.commit()  # expire_on_commit=False: what `work` returned stays loaded
            return result

    def close(self) -> None:
        with self._lock:
            if self._session is not None:
                self._session.close()
                self._session = None


def redact(text: str) -> str:
    """A request path or message fit for logs (C8): share-link tokens, and keys or
    tokens a client put anywhere else in a path or parameter, are masked."""
    if "_" not in text and "." not in text and not text.startswith("/v1/share/"):
        return text  # no key (`lk_`), token (`.`) or share path: the common path, fast
    text = _SHARE_PATH.sub("/v1/share/<token>", text)
    return _TOKEN_LIKE.sub("<token>", _KEY_LIKE.sub("lk_<redacted>", text))


class BaseHandler(RequestHandler):
    """Base of every API handler; see the module docstring."""

    #: The endpoint needs a valid `X-API-Key` (C5).
    requires_key = True
    #: Requests count against the rate limit (C5).
    rate_limited = True

    def initialize(self, deps: Dependencies) -> None:
        self.deps = deps
        self.buyer_id: str | None = None
        #: The buyer's entitled feeds, read with the key (`accounts.admit`).
        self.entitled: tuple[FeedVersion, ...] | None = None
        self.rate_hit: Hit | None = None
        self.db = RequestSession(deps.sessions)

    # ------------------------------------------------------------ headers
    def set_default_headers(self) -> None:
        # Runs again on every clear(), so error responses keep these headers.
        if not hasattr(self, "request_id"):
            self.request_id = new_request_id()
        self.set_header("X-Request-Id", self.request_id)
        hit: Hit | None = getattr(self, "rate_hit", None)
        if hit is not None:
            self.set_header("X-RateLimit-Limit", str(self.deps.limiter.limit))
            self.set_header("X-RateLimit-Remaining", str(hit.remaining))

    # ------------------------------------------------------------ prepare
    async def prepare(self) -> None:
        """Authenticate and count the request, check the method; raise what fails.
        A key admitted since the store last changed is let in on the event loop (with
        the in-process limiter); otherwise one trip to a worker thread does it (the
        store and, with Redis, the limiter block)."""
        failure: LineupsError | None = None
        if self.requires_key or self.rate_limited:
            key = self.request.headers.get("X-API-Key")
            admitted = self._admit_known(key)
            if admitted is None:
                admit = functools.partial(self._admit, key, self.request.remote_ip)
                admitted = await IOLoop.current().run_in_executor(self.deps.executor, admit)
            self.buyer_id, failure, self.rate_hit = admitted
        if self.rate_hit is not None:
            self.set_default_headers()
            if not self.rate_hit.allowed:
                seconds = self.rate_hit.retry_after
                raise RateLimited(
                    f"Rate limit of {self.deps.limiter.limit} requests per "
                    f"{self.deps.limiter.window:g} s exceeded; retry in {seconds} s",
                    retry_after=seconds,
                )
        self.check_method()
        if failure is not None and self.requires_key:
            raise failure

    def _admit_known(self, key: str | None) -> tuple[str, None, Hit | None] | None:
        """`_admit` without leaving the event loop, for a key whose admission is
        remembered and still current (`accounts.Admissions`) when the rate limiter
        keeps its counts in this process; None when `_admit` must run."""
        if not key or getattr(self.deps.limiter, "blocking", True):
            return None
        key_hash = accounts.hash_key(key)
        admission = self.deps.admissions.cached(key, key_hash, self.deps.turn_stamp)
        if admission is None:
            return None
        if self.deps.touches.due(key_hash):  # a write: on the executor, not awaited
            self.deps.executor.submit(self._touch, key)
        self.entitled = admission.feeds
        hit = self.deps.limiter.hit(f"key:{key_hash}") if self.rate_limited else None
        return admission.buyer_id, None, hit

    def _touch(self, key: str) -> None:
        try:
            with self.deps.sessions.kw["bind"].connect() as connection:
                accounts.touch_key(connection, key)
                connection.commit()
        except Exception:  # noqa: BLE001 - a missed last_used_at must not fail anything
            log.warning("Could not note the use of an API key", exc_info=True)

    def _admit(self, key: str | None, address: str) -> tuple[str | None, LineupsError | None, Hit | None]:
        """The buyer of `key` (or why not), with its entitled feeds (`self.entitled`),
        and the rate limiter's verdict. A known key, even a suspended buyer's, is
        counted as itself; anything else per client address, so that keys cannot be
        guessed at speed (C5). Runs on the executor, with a connection of its own for
        the one query (every request pays this step: no ORM session)."""
        buyer_id, failure = None, None
        key_hash = accounts.hash_key(key) if key and accounts.KEY_PATTERN.match(key) else None
        if key:
            try:
                with self.deps.sessions.kw["bind"].connect() as connection:
                    admission = self.deps.admissions.admit(connection, key)
                    buyer_id, self.entitled = admission.buyer_id, admission.feeds
                    if self.deps.touches.due(key_hash):  # only known keys reach this line
                        accounts.touch_key(connection, key)
                        connection.commit()
            except (Unauthorized, Forbidden) as exc:
                failure = exc
        else:
            failure = Unauthorized("Missing API key: send it in the X-API-Key header")
        if not self.rate_limited:
            return buyer_id, failure, None
        known = key_hash is not None and not isinstance(failure, Unauthorized)
        return buyer_id, failure, self.deps.limiter.hit(f"key:{key_hash}" if known else f"addr:{address}")

    def check_method(self) -> None:
        """C5: only GET and HEAD; anything else is 405 with code NOT_FOUND."""
        if self.request.method not in ALLOWED_METHODS:
            raise MethodNotAllowed(f"Method {self.request.method} is not allowed; use GET or HEAD")

    # ------------------------------------------------------------ work
    async def run(self, work: Callable[..., Any], *args: Any) -> Any:
        """`work(session, *args)` on the executor with this request's session."""
        return await IOLoop.current().run_in_executor(self.deps.executor, self.db.run, work, *args)

    async def read(self, work: Callable[..., Any], *args: Any) -> Any:
        """`work(session, *args)` on the executor in a transaction of its own on a
        read replica when there is one, else the primary (`store.db.Reads`): for
        pure reads of data, never for auth or writes, which stay on the primary."""
        return await IOLoop.current().run_in_executor(self.deps.executor, self.deps.reads.run, work, *args)

    def on_finish(self) -> None:
        if self.db.opened:
            self.deps.executor.submit(self.db.close)

    def query_args(self) -> dict[str, list[str]]:
        """The query string as text (UTF-8); a value that is not UTF-8 is 400."""
        return text_args(self.request.query_arguments)

    def only_params(self, args: dict[str, list[str]], allowed: tuple[str, ...]) -> None:
        """C5: a parameter the endpoint does not take is 400."""
        for name in args:
            if name not in allowed:
                raise ValidationError.parameter(name, "unknown parameter")

    def send_json(self, body: bytes | dict[str, Any]) -> None:
        if isinstance(body, dict):
            body = render.dumps(body)
        self.set_header("Content-Type", render.JSON_TYPE)
        self.finish(body)

    async def stream_csv(self, rows: pd.DataFrame) -> None:
        """Write a whole result as CSV (C9), a block at a time: each block is made on
        the executor (`render.csv_block`, Arrow kernels that release the GIL) while
        the previous one is sent, and flushed before the next is asked for, so
        memory holds two blocks at most whatever the size of the result, and a slow
        client slows only itself (share links, C8)."""
        self.set_header("Content-Type", render.CSV_TYPE)
        self.write(render.csv_header())
        loop = IOLoop.current()
        starts = range(0, len(rows), render.CHUNK_ROWS)

        def block(start: int) -> Any:
            return loop.run_in_executor(self.deps.exports, render.csv_block, rows, start, start + render.CHUNK_ROWS)

        pending = block(starts[0]) if starts else None
        for following in [*starts[1:], None]:
            body = await pending
            if following is not None:
                pending = block(following)
            self.write(body)
            await self.flush()
        self.finish()

    def compute_etag(self) -> None:
        """No ETag: bodies depend on the key, and hashing each one costs time."""
        return None

    async def head(self, *args: str) -> None:
        await self.get(*args)

    # ------------------------------------------------------------ errors
    def error_for(self, status_code: int, exc: BaseException | None) -> LineupsError:
        """The contract's error for what went wrong (one type per code)."""
        if isinstance(exc, LineupsError) and exc.status < 500:
            return exc
        if isinstance(exc, HTTPError) or exc is None:
            status = exc.status_code if isinstance(exc, HTTPError) else status_code
            if status == 404:
                return NotFound(f"No such resource: {redact(self.request.path)}")
            if status == 405:
                return MethodNotAllowed(f"Method {self.request.method} is not allowed; use GET or HEAD")
            if 400 <= status < 500:
                return ValidationError(f"Bad request ({status})")
        return InternalError(f"Internal server error; request id {self.request_id}")

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Write the seed's error body (section 7) for the failure; nothing else."""
        exc_info = kwargs.get("exc_info")
        error = self.error_for(status_code, exc_info[1] if exc_info else None)
        self.set_status(error.status)
        if isinstance(error, RateLimited):
            self.set_header("Retry-After", str(error.retry_after))
        if isinstance(error, MethodNotAllowed):
            self.set_header("Allow", ", ".join(ALLOWED_METHODS))
        self.set_header("Content-Type", render.JSON_TYPE)
        self.set_header("Cache-Control", "no-store")
        self.finish(render.dumps(error.body()))

    def log_exception(self, typ, value, tb) -> None:
        """Log failures without headers or query strings (keys and tokens stay out)."""
        where = f"{self.request.method} {redact(self.request.path)}"
        if isinstance(value, LineupsError) and value.status < 500:
            log.debug("%s: %s %s (request id %s)", where, value.code, redact(value.message), self.request_id)
        elif isinstance(value, HTTPError):
            log.warning("%s: HTTP %d (request id %s)", where, value.status_code, self.request_id)
        else:
            log.error("Unexpected error in %s (request id %s)", where, self.request_id, exc_info=(typ, value, tb))


class NotFoundHandler(BaseHandler):
    """Unknown paths: 404 NOT_FOUND for every method (C5). Still counted, so that a
    valid key sees its rate-limit headers."""

    requires_key = False

    def check_method(self) -> None:
        raise NotFound(f"No such resource: {redact(self.request.path)}")

    async def get(self, *args: str) -> None:  # pragma: no cover - prepare raises
        raise NotFound(f"No such resource: {redact(self.request.path)}")
