"""Serve the explorer alone: `python -m explorer --db URL --port P`.

For trying the explorer and for its browser tests; `lineups serve` serves it
together with the API on one port. `/` redirects to `/explorer`; other paths are 404.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import signal

from tornado.httpserver import HTTPServer
from tornado.web import Application, RedirectHandler

from explorer.app import ExplorerApp, origins_for
from explorer.session import ExplorerContext
from store.database import config
from store.access.usage import UsageWriter
from store.database.db import engine_for, make_sessionmaker, open_store, transaction
from store.views.lineups import Lineups
from store.settings import Settings, SettingsError


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m explorer", description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="Database URL (default: $LINEUPS_DB, else sqlite:///lineups.db).")
    parser.add_argument("--host", default="127.0.0.1", help="Address to listen on (default 127.0.0.1).")
    parser.add_argument("--port", type=int, default=5006, help="Port to listen on (default 5006).")
    parser.add_argument(
        "--base-url",
        help="Public address share links begin with (default: $LINEUPS_BASE_URL, else the store's "
        "base-url setting, else http://HOST:PORT).",
    )
    return parser.parse_args(argv)


def public_base_url(args: argparse.Namespace, sessions) -> str:
    """The address share links are made with, found as every `lineups` command finds it
    (`store.database.config.public_base_url`), else the listening address."""

    def stored() -> str | None:
        with transaction(sessions) as session:
            return config.get(session, config.BASE_URL)

    given = Settings.load(base_url=args.base_url).given_base_url
    return config.public_base_url(given, stored, f"http://{args.host}:{args.port}")


async def serve(args: argparse.Namespace) -> None:
    settings = Settings.load(db_url=args.db)
    secrets = settings.signing_secrets()  # before the store: no secret, no start (SettingsError)
    engine = engine_for(settings)
    open_store(engine, settings.db_url)
    sessions = make_sessionmaker(engine)
    settings = dataclasses.replace(settings, base_url=public_base_url(args, sessions))
    usage = UsageWriter(engine)  # notes of use, and of the views read (issue 47)
    context = ExplorerContext(sessions, Lineups(sessions, wait=0, noted=usage.view_read), secrets, settings.base_url,
                              usage=usage)
    explorer = ExplorerApp(context, websocket_origins=origins_for(settings.base_url, args.host, args.port))
    app = Application([(r"/", RedirectHandler, {"url": "/explorer"}), *explorer.routes()])
    server = HTTPServer(app)
    server.listen(args.port, args.host)
    explorer.start()
    loop = asyncio.get_running_loop()
    print(f"Serving the explorer at http://{args.host}:{args.port}/explorer (Ctrl+C stops)", flush=True)
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        server.stop()
        explorer.stop()
        context.usage.close()  # the last notes of use are written
        engine.dispose()


def main(argv=None) -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(serve(parse_args(argv)))
    except SettingsError as error:
        raise SystemExit(f"Error: {error}") from None


if __name__ == "__main__":
    main()
