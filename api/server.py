"""The HTTP server of one server process, with a clean stop (production issue).

`DrainingServer` is Tornado's `HTTPServer` that knows which of its connections are in
the middle of a request. `drain()` stops accepting connections, closes the idle
keep-alive ones at once, lets the requests in flight finish (their responses carry
`Connection: close`), and closes whatever is still open when the grace period ends.
Tornado's own `close_all_connections()` would cut the requests in flight.

It also bounds what a client can hold (issue 16 items 3, 4, 9), unless the caller
passes other values: no endpoint takes a body, so a body over `MAX_BODY_BYTES` is
refused before it is read; a client has `IDLE_TIMEOUT_S` to send a request's headers
(Tornado's header timeout is its idle timeout) and `BODY_TIMEOUT_S` for a body; and
a request Tornado cannot parse (a malformed request line, a control character in a
header, a body too large) is answered 400 with the contract's JSON error body (C5)
instead of Tornado's bare status line. Headers over `MAX_HEADER_BYTES` close the
connection without an answer (Tornado gives no hook there; a reverse proxy answers
them first, docs/deploying.md).

A request is in flight from the moment its headers arrive until the connection asks
for the next request (Tornado starts reading the next one only once the response is
finished) or closes. Websocket connections leave the HTTP server when they upgrade,
so they are not waited for.
"""

from __future__ import annotations

import asyncio
import logging

from tornado import httputil
from tornado.httpserver import HTTPServer
from tornado.iostream import IOStream

from api.request import new_request_id
from store.errors import ValidationError

log = logging.getLogger("lineups.server")
#: Bytes of a request body, at most: no endpoint takes one (the sign-in form's is ~100).
MAX_BODY_BYTES = 64 * 1024
#: Bytes of a request's start line and headers, at most (Tornado's default, stated).
MAX_HEADER_BYTES = 64 * 1024
#: Bytes a connection's read buffer may hold (headers, or a body being read).
MAX_BUFFER_BYTES = 1024 * 1024
#: Seconds a connection may sit idle between requests, which is also the time a
#: client has to send the headers of a request.
IDLE_TIMEOUT_S = 20.0
#: Seconds a client has to send a request body.
BODY_TIMEOUT_S = 10.0
CONNECTION_LIMITS = {
    "max_body_size": MAX_BODY_BYTES,
    "max_header_size": MAX_HEADER_BYTES,
    "max_buffer_size": MAX_BUFFER_BYTES,
    "idle_connection_timeout": IDLE_TIMEOUT_S,
    "body_timeout": BODY_TIMEOUT_S,
}
#: What Tornado writes for a request it cannot parse (tornado.http1connection).
_BARE_400 = b"HTTP/1.1 400 Bad Request\r\n\r\n"


class DrainingServer(HTTPServer):
    """An `HTTPServer` whose `drain()` finishes the requests in flight."""

    def initialize(self, *args, **kwargs) -> None:
        for name, value in CONNECTION_LIMITS.items():
            if kwargs.get(name) is None:
                kwargs[name] = value
        super().initialize(*args, **kwargs)
        #: Every open connection, and whether it is in the middle of a request.
        self._busy: dict[object, bool] = {}
        #: Requests begun since the server started (their headers arrived).
        self.requests_begun = 0

    def handle_stream(self, stream: IOStream, address: tuple) -> None:
        _json_protocol_errors(stream)
        super().handle_stream(stream, address)

    def start_request(self, server_conn: object, request_conn: httputil.HTTPConnection) -> httputil.HTTPMessageDelegate:
        # Called when a connection opens and again after each finished response.
        self._busy[server_conn] = False
        delegate = super().start_request(server_conn, request_conn)
        return _OnHeaders(delegate, lambda: self._begin(server_conn))

    def _begin(self, server_conn: object) -> None:
        self._busy[server_conn] = True
        self.requests_begun += 1

    def on_close(self, server_conn: object) -> None:
        self._busy.pop(server_conn, None)
        super().on_close(server_conn)

    @property
    def in_flight(self) -> int:
        """Connections in the middle of a request."""
        return sum(self._busy.values())

    async def drain(self, grace: float) -> bool:
        """Stop accepting, finish the requests in flight for up to `grace` seconds,
        then close every connection. Returns True when no request was cut."""
        self.stop()
        self.conn_params.no_keep_alive = True  # shared by every connection's requests
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while self._busy:
            await self._close_idle()
            if not self._busy:
                break
            if loop.time() >= deadline:
                log.warning("Grace period of %g s over: closing %d connection(s) mid-request", grace, self.in_flight)
                await self.close_all_connections()
                return False
            await asyncio.sleep(0.05)
        return True

    async def _close_idle(self) -> None:
        idle = [conn for conn, busy in self._busy.items() if not busy]
        for conn in idle:
            await conn.close()


def protocol_error_response() -> bytes:
    """The answer to a request Tornado cannot parse: 400 with the contract's JSON
    error body (C5), and the connection closed."""
    request_id = new_request_id()
    body = ValidationError(f"Malformed or oversized HTTP request; request id {request_id}").to_json()
    head = (
        "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json; charset=UTF-8\r\n"
        f"Content-Length: {len(body)}\r\nX-Request-Id: {request_id}\r\nCache-Control: no-store\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + body


def _json_protocol_errors(stream: IOStream) -> None:
    """Make `stream` send `protocol_error_response()` where Tornado writes its bare
    400 status line (the only place it writes to a server stream other than a
    response's own)."""
    write = stream.write

    def json_write(data, *args, **kwargs):
        if data == _BARE_400:
            data = protocol_error_response()
        return write(data, *args, **kwargs)

    stream.write = json_write  # type: ignore[method-assign]


class _OnHeaders(httputil.HTTPMessageDelegate):
    """Passes a request through to `inner`, calling `on_headers` when its headers
    have arrived."""

    def __init__(self, inner: httputil.HTTPMessageDelegate, on_headers) -> None:
        self._inner = inner
        self._on_headers = on_headers

    def headers_received(self, start_line, headers):
        self._on_headers()
        return self._inner.headers_received(start_line, headers)

    def data_received(self, chunk: bytes):
        return self._inner.data_received(chunk)

    def finish(self) -> None:
        self._inner.finish()

    def on_connection_close(self) -> None:
        self._inner.on_connection_close()
