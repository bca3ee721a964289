"""The API page's ceiling: a bare Tornado handler returning a pre-serialised body.

Run as its own process by `bench/full.py`, like the service (one process, one event
loop, same Tornado), so that the two differ only in what the service does per request:

    python -m bench.ceiling PORT BODY_FILE

Every GET answers 200 with the bytes of BODY_FILE as `application/json`. It stops on
SIGTERM or SIGINT.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from tornado.httpserver import HTTPServer
from tornado.web import Application, RequestHandler


class BodyHandler(RequestHandler):
    def initialize(self, body: bytes) -> None:
        self.body = body

    def get(self, *args: str) -> None:
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(self.body)

    def compute_etag(self) -> None:  # the service computes none either
        return None


async def serve(port: int, body: bytes) -> None:
    app = Application([(r"/.*", BodyHandler, {"body": body})], log_function=lambda handler: None)
    server = HTTPServer(app)
    server.listen(port, "127.0.0.1")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    server.stop()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1]), Path(sys.argv[2]).read_bytes()))
