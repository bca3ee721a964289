"""`lineups serve`: one process that serves the API (contract C10, C11).

It opens (or creates) the store, with `--demo` loads the demo data set into an empty
store, prints the API key and URLs to try, and serves until SIGINT or SIGTERM, then
stops taking connections and finishes cleanly. The explorer and share links join the
same application through `api.app.make_app(extra_routes=...)`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from concurrent.futures import ThreadPoolExecutor

import click
from sqlalchemy import func, select

from cli.main import common, lineups
from store import accounts
from store.db import transaction
from store.errors import ValidationError
from store.schema import Buyer, Feed

DEMO_BUYER = "Demo Buyer"
DEMO_RECORDS = 5000
DEMO_SEED = 7
#: Seconds that open requests get to finish after a stop signal.
SHUTDOWN_GRACE = 5.0


@lineups.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="Port to listen on.")
@click.option("--demo", is_flag=True, help="Load the demo data set into an empty store first and print its API key.")
@click.option("--base-url", metavar="URL", default=None, help="Public address of the service (default http://HOST:PORT).")
@common
def serve(ctx, host: str, port: int, demo: bool) -> None:
    """Serve the REST API."""
    if ctx.base_url is None and not os.environ.get("LINEUPS_BASE_URL"):
        shown_host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        ctx.base_url = f"http://{shown_host}:{port}"
    api_key = _prepare_demo(ctx) if demo else None
    if not ctx.as_json:
        _print_welcome(ctx.settings.base_url, api_key)
    else:
        ctx.emit({"base_url": ctx.settings.base_url, "api_key": api_key})
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(_serve(ctx, host, port))


def _prepare_demo(ctx) -> str:
    """The demo buyer's API key: the demo data set loaded into an empty store, or a
    fresh key when the store already holds the demo buyer. Raises ValidationError for a
    store that holds other data."""
    from cli.operators import run_demo

    with transaction(ctx.sessions) as session:
        buyer = session.scalar(select(Buyer).where(Buyer.name == DEMO_BUYER))
        if buyer is not None:
            key, _ = accounts.create_key(session, buyer)
            click.echo(f"The store already holds the demo data; created a new key for {DEMO_BUYER}.", err=True)
            return key
        feeds = session.scalar(select(func.count()).select_from(Feed))
        buyers = session.scalar(select(func.count()).select_from(Buyer))
    if feeds or buyers:
        raise ValidationError.parameter(
            "demo", "the store is not empty: --demo loads the demo data into an empty store only"
        )
    payload = run_demo(ctx, DEMO_RECORDS, DEMO_SEED, None)
    click.echo(f"Loaded the demo data: {payload['records']} records in {len(payload['feeds'])} feeds.", err=True)
    return payload["api_key"]


def _print_welcome(base_url: str, api_key: str | None) -> None:
    key = api_key or "<API_KEY>"
    if api_key:
        click.echo(f"\nDemo buyer API key: {api_key}   (shown once; keep it)")
    click.echo(f"\nServing the lineup API at {base_url}/v1  (Ctrl+C stops)\nTry:\n")
    for path in (
        "/v1/sources",
        "/v1/lineups?limit=5",
        "/v1/lineups?commodity=Soybeans&port=BRSSZ&limit=20",
        "/v1/lineups?merge=by_source&format=csv&limit=50",
    ):
        click.echo(f"  curl -H 'X-API-Key: {key}' '{base_url}{path}'")
    click.echo(f"  curl '{base_url}/v1/openapi.json'")
    click.echo(f"  curl '{base_url}/healthz'\n")


def make_server_app(ctx, executor: ThreadPoolExecutor):
    """The application for `ctx`'s store: the API (and, later, the explorer and share
    links through `extra_routes`)."""
    from api.app import make_app
    from store.lineups import LineupService

    limiter = None
    if ctx.settings.redis_url:  # shared counts across processes (C5)
        from api.ratelimit_redis import RedisLimiter

        limiter = RedisLimiter(ctx.settings.redis_url)
    return make_app(ctx.settings, ctx.sessions, LineupService(), limiter=limiter, executor=executor)


async def _serve(ctx, host: str, port: int) -> None:
    from tornado.httpserver import HTTPServer

    executor = ThreadPoolExecutor(8, thread_name_prefix="lineups-api")
    server = HTTPServer(make_server_app(ctx, executor))
    server.listen(port, host)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        click.echo("\nStopping: no new connections; finishing open requests…", err=True)
        server.stop()
        try:
            await asyncio.wait_for(server.close_all_connections(), SHUTDOWN_GRACE)
        except asyncio.TimeoutError:  # pragma: no cover - a request that hangs
            pass
        executor.shutdown(wait=False, cancel_futures=True)
        click.echo("Stopped.", err=True)
