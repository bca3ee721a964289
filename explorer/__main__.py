"""Serve the explorer alone: `python -m explorer --db URL --port P`.

For trying the explorer and for its browser tests; `lineups serve` serves it
together with the API on one port. `/` redirects to `/explorer`; other paths are 404.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal

from tornado.httpserver import HTTPServer
from tornado.web import Application, RedirectHandler

from explorer.app import ExplorerApp, origins_for
from explorer.session import ExplorerContext
from store.database.db import engine_for, make_sessionmaker, open_store
from store.views.lineups import Lineups
from store.settings import Settings, SettingsError


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m explorer", description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="Database URL (default: $LINEUPS_DB, else sqlite:///lineups.db).")
    parser.add_argument("--host", default="127.0.0.1", help="Address to listen on (default 127.0.0.1).")
    parser.add_argument("--port", type=int, default=5006, help="Port to listen on (default 5006).")
    parser.add_argument("--base-url", help="Public address (default http://HOST:PORT).")
    return parser.parse_args(argv)


async def serve(args: argparse.Namespace) -> None:
    base_url = args.base_url or f"http://{args.host}:{args.port}"
    settings = Settings.load(db_url=args.db, base_url=base_url)
    secrets = settings.signing_secrets()  # before the store: no secret, no start (SettingsError)
    engine = engine_for(settings)
    open_store(engine, settings.db_url)
    context = ExplorerContext((sessions := make_sessionmaker(engine)), Lineups(sessions), secrets, settings.base_url)
    explorer = ExplorerApp(context, websocket_origins=origins_for(settings.base_url, args.host, args.port))
    app = Application([(r"/", RedirectHandler, {"url": "/explorer"}), *explorer.routes()])
    server = HTTPServer(app)
    server.listen(args.port, args.host)
    explorer.start()
    loop = asyncio.get_running_loop()
    print(f"Serving the explorer at {settings.base_url}/explorer (Ctrl+C stops)", flush=True)
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        server.stop()
        explorer.stop()
        engine.dispose()


def main(argv=None) -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(serve(parse_args(argv)))
    except SettingsError as error:
        raise SystemExit(f"Error: {error}") from None


if __name__ == "__main__":
    main()
