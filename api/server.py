"""The HTTP server of one server process, with a clean stop (production issue).

`DrainingServer` is Tornado's `HTTPServer` that knows which of its connections are in
the middle of a request. `drain()` stops accepting connections, closes the idle
keep-alive ones at once, lets the requests in flight finish (their responses carry
`Connection: close`), and closes whatever is still open when the grace period ends.
Tornado's own `close_all_connections()` would cut the requests in flight.

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

log = logging.getLogger("lineups.server")


class DrainingServer(HTTPServer):
    """An `HTTPServer` whose `drain()` finishes the requests in flight."""

    def initialize(self, *args, **kwargs) -> None:
        super().initialize(*args, **kwargs)
        #: Every open connection, and whether it is in the middle of a request.
        self._busy: dict[object, bool] = {}

    def start_request(self, server_conn: object, request_conn: httputil.HTTPConnection) -> httputil.HTTPMessageDelegate:
        # Called when a connection opens and again after each finished response.
        self._busy[server_conn] = False
        delegate = super().start_request(server_conn, request_conn)
        return _OnHeaders(delegate, lambda: self._busy.__setitem__(server_conn, True))

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
