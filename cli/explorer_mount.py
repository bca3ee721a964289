"""The explorer inside a server process (`cli.serve.make_server_app`): mounted at
/explorer once it is ready, so that a fresh process answers /healthz and the API at
once (issue 15) and builds the explorer when its API is quiet or someone opens it;
until then /explorer answers 503 with a page that reloads itself.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import TYPE_CHECKING, Callable

from tornado.httputil import HTTPServerConnectionDelegate
from tornado.web import Application, RequestHandler

from cli.process_objects import settle_objects
from explorer.headers import ExplorerHeaders

if TYPE_CHECKING:
    from api.server import DrainingServer
    from explorer.app import ExplorerApp

log = logging.getLogger("lineups.server")

#: A fresh process builds its explorer once no request has begun for this long (and
#: none is in flight), or at once when someone opens it.
QUIET_S = 0.25


class ExplorerMount(HTTPServerConnectionDelegate):
    """The explorer at /explorer, mounted once it is ready. Importing Panel and Bokeh
    and rendering their components once (`explorer.app.warm_up`) takes one to two
    seconds of Python, which the API does not wait for: a fresh process answers
    /healthz and the API at once (issue 15), and builds the explorer in a thread once
    its API is quiet (`QUIET_S`) or someone opens /explorer, whichever comes first.
    While the build runs it holds the interpreter lock most of the time, and the API's
    pages wait for it (a pass of distinct pages begun with a new process had a p99 of
    0.7-4.7 s): so it is not begun while requests keep coming. Until the explorer is
    mounted its pages answer 503 with `Retry-After` and a page that reloads itself."""

    def __init__(self, make: Callable[[], "ExplorerApp"], log_function: Callable[[RequestHandler], None]):
        """`make()` composes the explorer (it imports Panel); `log_function` logs the
        starting page's requests as the API logs its own."""
        self._make = make
        self.explorer: ExplorerApp | None = None
        self._asked = asyncio.Event()  # someone opened /explorer before it was mounted
        self._closing = False
        self._target = Application([(r".*", ExplorerStarting, {"asked": self._asked})], log_function=log_function)
        self._target.add_transform(ExplorerHeaders)

    def start_request(self, server_conn, request_conn):
        return self._target.start_request(server_conn, request_conn)

    def build(self) -> None:
        """Import and compose the explorer and render its components once: in any
        thread (nothing here touches the event loop)."""
        from explorer.app import warm_up

        if self.explorer is None:
            explorer = self._make()
            warm_up()
            gc.collect()  # here, in this thread, not on the event loop (`mount` freezes)
            self.explorer = explorer

    def mount(self) -> None:
        """Start the explorer on the running event loop and serve it from now on."""
        self.build()
        self.explorer.start()
        settle_objects(collect=False)  # the explorer's objects, collected by `build`
        self._target = self.explorer.tornado
        log.info("The explorer is ready at /explorer")

    async def mount_soon(self, server: "DrainingServer") -> None:
        """Once `server` is quiet or the explorer is asked for, `build` in a thread of
        its own (the API's threads stay free), then `mount`; nothing when the process
        stops first (`close`)."""
        if await self._quiet_or_asked(server):
            await asyncio.get_running_loop().run_in_executor(None, self.build)
            self.mount()

    async def _quiet_or_asked(self, server: "DrainingServer") -> bool:
        while not self._closing:
            begun = server.requests_begun
            try:
                await asyncio.wait_for(self._asked.wait(), QUIET_S)
                return True
            except asyncio.TimeoutError:
                if server.requests_begun == begun and not server.in_flight:
                    return True
        return False

    def close(self) -> None:
        """The process is stopping: a build not begun is not begun."""
        self._closing = True

    def stop(self) -> None:
        if self.explorer is not None:
            self.explorer.stop()


class ExplorerStarting(RequestHandler):
    """/explorer while the process is still starting the explorer: 503, and a page
    that tries again by itself a second later; asking starts the build."""

    def initialize(self, asked: asyncio.Event) -> None:
        self._asked = asked

    def prepare(self) -> None:
        self._asked.set()
        self.set_status(503)
        self.set_header("Retry-After", "1")
        self.set_header("Cache-Control", "no-store")
        self.finish(STARTING_PAGE)


STARTING_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="1"><title>Lineups explorer</title></head>
<body style="font-family: sans-serif; margin: 3em"><p>The explorer is starting. This page
reloads by itself in a moment.</p></body></html>"""
