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
  transaction of its own on a read replica when there is one (`store.database.db.Reads`).

Dependencies (`api.dependencies`) arrive through `initialize()` from the route table,
never as globals; per-request helpers are in `api.request`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any, Callable

from tornado.ioloop import IOLoop
from tornado.iostream import StreamClosedError
from tornado.web import HTTPError, RequestHandler

from api import render
from api.dependencies import Dependencies
from api.exports import ExportStalled, NextBlock
from api.request import RequestSession, new_request_id, text_args
from api.redaction import redact
from api.ratelimit import Hit
from store.access import accounts
from store.access.accounts import FeedVersion
from store.views.lineups import patiently
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

log = logging.getLogger("lineups.api")
ALLOWED_METHODS = ("GET", "HEAD")


#: `Cache-Control` of every response to a keyed endpoint (issue 16 item 10).
KEYED_CACHE_CONTROL = "private, no-store"
#: The access log's status of a response the client did not take to its end (nginx's).
CLIENT_CLOSED = 499


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
        self.set_header("X-Content-Type-Options", "nosniff")  # a body is what its type says (issue 45 item 2)
        if self.requires_key:  # licensed data: no shared cache keeps it (issue 16 item 10)
            self.set_header("Cache-Control", KEYED_CACHE_CONTROL)
        hit: Hit | None = getattr(self, "rate_hit", None)
        if hit is not None:
            self.set_header("X-RateLimit-Limit", str(self.deps.limiter.limit))
            self.set_header("X-RateLimit-Remaining", str(hit.remaining))

    def decode_argument(self, value: bytes, name: str | None = None) -> str:
        """A path argument (`name` None) with bytes that are not UTF-8 (`%ff`) made
        U+FFFD: Tornado's own decoding answered "Bad request (400)" as HTML before
        `prepare`, with no key checked and no rate limit counted (issue 49 item 10).
        Now the request is admitted like any other and the endpoint's rules answer it
        (an id that is none: 404; a source that is no UUID: 400, C5); a share-link
        token that fails its check: 401, counted like any bad token (issue 16 item 9).
        Query arguments are read by `api.request.text_args` (not UTF-8: 400, C5)."""
        if name is None:
            return value.decode("utf-8", "replace")
        return super().decode_argument(value, name)

    # ------------------------------------------------------------ prepare
    async def prepare(self) -> None:
        """Authenticate and count the request, check the method; raise what fails.
        One trip to a worker thread does it (the store and, with Redis, the limiter
        block); it only reads, so it never waits for a writer (issue 16 item 1)."""
        failure: LineupsError | None = None
        if self.requires_key or self.rate_limited:
            key = self.request.headers.get("X-API-Key")
            admit = functools.partial(self._admit, key, self.request.remote_ip)
            self.buyer_id, failure, self.rate_hit = await IOLoop.current().run_in_executor(self.deps.executor, admit)
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

    def _admit(self, key: str | None, address: str) -> tuple[str | None, LineupsError | None, Hit | None]:
        """The buyer of `key` (or why not), with its entitled feeds (`self.entitled`),
        and the rate limiter's verdict. A known key, even a suspended buyer's, is
        counted as itself; anything else per client address, so that keys cannot be
        guessed at speed (C5). Runs on the executor, with a connection of its own for
        the one query, outside a transaction (every request pays this step: no ORM
        session); the key's use is noted for the background writer
        (`store.access.usage`), not written here."""
        buyer_id, failure = None, None
        key_hash = accounts.hash_key(key) if key and accounts.KEY_PATTERN.match(key) else None
        if key:
            try:
                # One statement, so no transaction: on PostgreSQL BEGIN and ROLLBACK
                # would be two more round trips of every request.
                with self.deps.sessions.kw["bind"].connect() as connection:
                    connection.execution_options(isolation_level="AUTOCOMMIT")
                    admission = accounts.admit(connection, key)
                buyer_id, self.entitled = admission.buyer_id, admission.feeds
                self.deps.usage.key_used(key_hash)  # only known keys reach this line
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
        read replica when there is one, else the primary (`store.database.db.Reads`): for
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

    async def stream_csv(self, next_block: NextBlock) -> None:
        """Write a whole result as CSV (C9), a block at a time: `next_block()` runs on
        the export executor and gives the next block's CSV text (`ExportLimits.
        block_rows` rows; None after the last), read and made there
        (`Lineups.csv_blocks`: the driver's fetch, then Arrow kernels that release
        the GIL) while the previous one is sent, once the client has taken a piece of
        it. Memory holds two small blocks at most whatever the size of the result,
        and one while the client takes nothing (issue 49 item 6); a slow client slows
        only itself (share links, C8).

        A client that takes nothing for `stall_s` seconds is cut off, and one that
        goes away ends the export: both are logged as an abort (INFO, status 499 in
        the access log), not as an error (issue 16 item 2)."""
        self.set_header("Content-Type", render.CSV_TYPE)
        self.write(render.csv_header())
        loop = IOLoop.current()

        def block() -> Any:
            return loop.run_in_executor(self.deps.exports, next_block)

        step = self.deps.export_slots.limits.send_bytes
        pending = block()
        sent = 0
        try:
            while (body := await pending) is not None:
                pending = None
                for start in range(0, len(body), step):  # each piece must be taken within stall_s
                    self.write(body[start:start + step])
                    await self._sent()
                    sent += min(step, len(body) - start)
                    if pending is None:  # the client reads: make the next block meanwhile
                        pending = block()
                if pending is None:  # an empty block
                    pending = block()
        except (StreamClosedError, ExportStalled) as gone:
            self._abort(gone, sent)
        finally:
            if pending is not None and not pending.done():  # dropped, never left running into a closed request
                await asyncio.wait([pending])
        self.finish()

    async def _sent(self) -> None:
        """Send what is written; raises ExportStalled when the client took none of it
        for `stall_s` seconds, StreamClosedError when it went away."""
        flushed = self.flush()
        done, _ = await asyncio.wait([flushed], timeout=self.deps.export_slots.limits.stall_s)
        if not done:
            raise ExportStalled()
        flushed.result()

    def _abort(self, gone: Exception, sent: int) -> None:
        """Note the end of an export the client did not take (499, logged at INFO)."""
        self.set_status(CLIENT_CLOSED, "Client Closed Request")
        if isinstance(gone, ExportStalled):
            self.request.connection.close()
            why = f"the client read nothing for {self.deps.export_slots.limits.stall_s:g} s"
        else:
            why = "the client went away"
        log.info("Export of %s ended after %d bytes: %s (request id %s)",
                 redact(self.request.path), sent, why, self.request_id)

    async def blocking(self, work: Callable[..., Any], *args: Any) -> Any:
        """`work(*args)` on the executor (store calls that open their own sessions).
        While a view it reads is being built by another process (`builds.ViewBusy`),
        it is asked again after pauses on the event loop (`patiently`): a waiting
        reader holds none of the executor's threads, which serve every buyer."""
        loop = IOLoop.current()
        return await patiently(lambda: loop.run_in_executor(self.deps.executor, work, *args))

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
        self.set_header("Cache-Control", KEYED_CACHE_CONTROL if self.requires_key else "no-store")
        self.finish(error.to_json())

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
