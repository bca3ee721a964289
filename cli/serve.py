"""`lineups serve`: the API on one port, in one or several processes (contract C10,
C11, production issue).

It checks the configuration and the store (a missing `LINEUPS_SECRET` with
PostgreSQL, or a schema that is behind, is a start-up error that says what to do),
with `--demo` loads the demo data set into an empty store, prints the API key and
URLs to try, binds the port (`cli.listening`), and then serves:

- `--processes 1` (the default): this process serves;
- `--processes N`: N forked workers serve the one port, supervised by this
  process (`cli.supervisor`), which replaces a worker that dies. On Linux each
  worker listens on a socket of its own bound with SO_REUSEPORT, so the kernel
  spreads new connections over the workers; elsewhere they accept on this
  process's socket.

Each serving process makes its engine, pools, writer of notes of use and rate limiter itself
(`run_worker`), after any fork; with `--db-replica URL` (or `LINEUPS_DB_REPLICAS`)
also one engine per read replica, which takes the API's pure reads (`store.database.db.Reads`).
`--redis URL` (or `LINEUPS_REDIS`) shares the rate limits through Redis (C5). Several
processes without it would each count alone, multiplying every limit: that is refused
unless `--per-process-limits` says it is meant, which is then logged as a WARNING
(issue 16 item 6). SIGTERM or SIGINT: stop taking connections, finish the
requests in flight (up to `SHUTDOWN_GRACE` seconds), exit 0. The application is composed in one place, `make_server_app`, where the
explorer and share links join the API.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import os
import signal
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import click
from sqlalchemy import func, select
from tornado.web import Application

from cli import logs
from cli.demo import run_demo
from cli.explorer_mount import ExplorerMount
from cli.main import common
from cli.process_objects import settle_objects
from store.access import accounts
from store.database.db import transaction
from store.errors import LineupsError, ValidationError
from store.database.schema import Buyer, Feed
from store.settings import Settings, SettingsError

if TYPE_CHECKING:
    from cli.listening import Listening
    from explorer.app import ExplorerApp

log = logging.getLogger("lineups.server")
DEMO_BUYER = "Demo Buyer"
DEMO_RECORDS = 5000
DEMO_SEED = 7
#: Seconds that requests in flight get to finish after a stop signal.
SHUTDOWN_GRACE = 10.0
#: Worker threads for store and merge work per server process.
WORKER_THREADS = 8
LOG_FORMAT = logs.LOG_FORMAT


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="Port to listen on.")
@click.option("--demo", is_flag=True, help="Load the demo data set into an empty store first and print its API key.")
@click.option("--processes", default=1, show_default=True, type=click.IntRange(1, 256),
              help="Server processes accepting on the port.")
@click.option("--redis", "redis_url", metavar="URL", default=None,
              help="Redis URL for rate limits shared by every process (default $LINEUPS_REDIS).")
@click.option("--rate-limit", type=click.IntRange(1), default=None, hidden=True,
              help="Requests per key per rolling minute (default $LINEUPS_RATE_LIMIT, else 100).")
@click.option("--base-url", metavar="URL", default=None, help="Public address of the service, stored as the base-url setting for later commands (default $LINEUPS_BASE_URL, else `lineups config get base-url`, else http://HOST:PORT).")
@click.option("--db-replica", "db_replicas", metavar="URL", multiple=True,
              help="A read replica of --db for the API's reads; repeatable (default $LINEUPS_DB_REPLICAS).")
@click.option("--per-process-limits", is_flag=True,
              help="With --processes N and no Redis: let each process count rate limits alone (N times the limit).")
@common
def serve(
    ctx, host: str, port: int, demo: bool, processes: int, redis_url: str | None, rate_limit: int | None,
    db_replicas: tuple[str, ...], per_process_limits: bool,
) -> None:
    """Serve the REST API."""
    _check_secrets(ctx.settings)  # before the store is opened: no secret, no start
    settings = _settings(ctx, host, port, redis_url=redis_url, rate_limit=rate_limit, db_replicas=db_replicas or None)
    logs.configure(logging.INFO)
    _check_shared_limits(settings, processes, per_process_limits)
    _check_replicas(settings)
    _check_redis(settings.redis_url)
    api_key = _prepare_demo(ctx) if demo else None
    ctx.sessions.kw["bind"].dispose()  # the store is checked; each worker opens its own
    listening = _bind(host, port, processes)
    if port == 0 and settings.base_url == _listening_url(host, 0):  # the default: name the port bound
        settings = ctx.settings = dataclasses.replace(settings, base_url=_listening_url(host, listening.port))
    if ctx.as_json:
        ctx.emit({"base_url": settings.base_url, "api_key": api_key})
    else:
        _print_welcome(settings.base_url, api_key, processes)
    _load_code()
    work = functools.partial(run_worker, settings, listening, supervised=processes > 1)
    if processes == 1:
        work(0)
        return
    from cli.supervisor import Supervisor

    if listening.per_worker:
        _log_sockets_per_worker(listening)
    sys.exit(Supervisor(processes, work, listening.bound, kill_after=SHUTDOWN_GRACE + 20).run())


def _settings(ctx, host: str, port: int, **flags) -> Settings:
    """The context's settings with this command's flags, and the public base URL
    (`store.database.config.public_base_url`): --base-url (then stored, for the
    commands run later), else $LINEUPS_BASE_URL, else the stored setting, else the
    listening address (`_listening_url`; for --port 0, `serve` puts in the port bound)."""
    from store.database import config

    if ctx.base_url is not None:
        _store_base_url(ctx)
    given = ctx.base_url or ctx.settings.given_base_url
    flags["base_url"] = config.public_base_url(given, ctx.stored_base_url, _listening_url(host, port))
    ctx.settings = dataclasses.replace(ctx.settings, **{k: v for k, v in flags.items() if v is not None})
    return ctx.settings


def _listening_url(host: str, port: int) -> str:
    """The base URL of the listening address (a wildcard host shown as 127.0.0.1)."""
    shown_host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    return f"http://{shown_host}:{port}"


def _store_base_url(ctx) -> None:
    """Keep --base-url as the store's base-url setting (issue 18.6)."""
    from store.database import config

    with transaction(ctx.sessions) as session:
        ctx.base_url = config.put(session, config.BASE_URL, ctx.base_url)


def _load_code() -> None:
    """Import the API's modules in this process, before any fork, so that the
    workers start at once and share the pages. Not the explorer's: each process
    imports Panel and Bokeh after it listens, once its API is quiet or someone opens
    the explorer (`ExplorerMount`), so that none of them delays the API's answers."""
    import api.app  # noqa: F401
    import api.server  # noqa: F401

    settle_objects()


def _check_shared_limits(settings: Settings, processes: int, per_process: bool) -> None:
    """Refuse several processes without Redis: each would count the rate limits
    alone, and a key would get `processes` times its limit (C5: the count is shared).
    `per_process` accepts that, with a WARNING (issue 16 item 6)."""
    if processes == 1 or settings.redis_url:
        return
    multiplied = f"a key could make up to {processes * settings.rate_limit} requests a minute instead of {settings.rate_limit}"
    if not per_process:
        raise ValidationError.parameter(
            "processes",
            f"--processes {processes} without --redis would count rate limits in each process alone ({multiplied}); "
            "give --redis URL (or LINEUPS_REDIS) to share them, or --per-process-limits to accept per-process counts",
        )
    log.warning("Rate limits are counted in each of the %d processes alone (--per-process-limits): %s",
                processes, multiplied)


def _check_secrets(settings: Settings) -> None:
    """Refuse to start without a signing secret where one must be configured."""
    try:
        settings.signing_secrets()
    except SettingsError as exc:
        raise LineupsError(str(exc)) from exc


def _check_replicas(settings: Settings) -> None:
    """Refuse replicas that cannot work (not PostgreSQL, or a SQLite store)."""
    try:
        settings.check_replicas()
    except SettingsError as exc:
        raise LineupsError(str(exc)) from exc


def _check_redis(url: str | None) -> None:
    """Refuse a Redis URL that is no URL; only warn when Redis does not answer, since
    the server serves on with per-process limits until it does (documented)."""
    if not url:
        return
    import redis

    try:
        client = redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1)
    except ValueError as exc:
        raise LineupsError(f"--redis / LINEUPS_REDIS is not a Redis URL: {exc}") from exc
    try:
        client.ping()
    except redis.RedisError as exc:
        log.warning("Redis is not answering (%s): rate limits are per process until it does", type(exc).__name__)
    finally:
        client.close()


def _bind(host: str, port: int, processes: int) -> "Listening":
    """The port bound before any fork (`cli.listening`): a port in use is a start-up
    error here, in the parent, and `--port 0` gives every worker the same port."""
    from cli.listening import Listening

    try:
        return Listening.bind(host, port, processes)
    except OSError as exc:
        raise LineupsError(f"Cannot listen on {host}:{port}: {exc.strerror or exc}") from exc


def _log_sockets_per_worker(listening: "Listening") -> None:
    from cli.listening import migrates_queued_connections

    # INFO, not WARNING: it is the default of every kernel, and a worker that dies is
    # rare (the supervisor replaces it); docs/deploying.md, section 3, says what to set.
    migrates = "" if migrates_queued_connections() else (
        "; net.ipv4.tcp_migrate_req is not 1, so new connections queued for a worker that dies are reset"
    )
    log.info("Each worker listens on %s with a socket of its own (SO_REUSEPORT)%s", listening.describe(), migrates)


def _prepare_demo(ctx) -> str:
    """The demo buyer's API key: the demo data set loaded into an empty store, or a
    fresh key when the store already holds the demo buyer. Raises ValidationError for a
    store that holds other data."""
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


def _print_welcome(base_url: str, api_key: str | None, processes: int = 1) -> None:
    key = api_key or "<API_KEY>"
    if api_key:
        click.echo(f"\nDemo buyer API key: {api_key}   (shown once; keep it)")
    workers = f" by {processes} processes" if processes > 1 else ""
    click.echo(f"\nServing the lineup API at {base_url}/v1{workers}  (Ctrl+C stops)\nTry:\n")
    for path in (
        "/v1/sources",
        "/v1/lineups?limit=5",
        "/v1/lineups?commodity=Soybeans&port=BRSSZ&limit=20",
        "/v1/lineups?merge=by_source&format=csv&limit=50",
    ):
        click.echo(f"  curl -H 'X-API-Key: {key}' '{base_url}{path}'")
    click.echo(f"  curl '{base_url}/v1/openapi.json'")
    click.echo(f"  curl '{base_url}/healthz'\n")
    click.echo(f"The data explorer: {base_url}/explorer  (sign in with the API key)\n")


@dataclasses.dataclass
class ServerApp:
    """What one server process serves: the API's application, with the explorer
    mounted into it at /explorer (`explorer.mount()` or `await
    explorer.mount_soon(server)` on the serving loop; `explorer.close()` and
    `explorer.stop()` on drain)."""

    app: Application
    explorer: ExplorerMount


def make_server_app(
    settings: Settings, sessions, executor: ThreadPoolExecutor, address: tuple[str, int] | None = None, reads=None
) -> ServerApp:
    """The application of one server process over `sessions`: the API, the share
    links and the explorer at /explorer, all reading the merged views kept in the
    store (`store.views.lineups.Lineups`: no merge state in the process). `address`
    is the listening host and port, whose pages may also open the explorer's
    websocket; `reads` (`store.database.db.Reads`) takes the API's pure reads to read
    replicas. Called in each process after any fork, so the rate limiter's
    connections and the explorer's sessions belong to that process."""
    from api.app import log_request, make_app
    from api.ratelimit import MemoryLimiter
    from explorer import ROUTE as explorer_route  # the package alone: no Panel yet
    from store.access.usage import UsageWriter

    if settings.redis_url:  # counts shared by every process (C5)
        from api.ratelimit_redis import RedisLimiter

        limiter = RedisLimiter(settings.redis_url, limit=settings.rate_limit)
    else:
        limiter = MemoryLimiter(settings.rate_limit)
    usage = UsageWriter(sessions.kw["bind"])  # one writer of notes of use for the API and the explorer

    def make_explorer() -> "ExplorerApp":
        from explorer.app import ExplorerApp, origins_for
        from explorer.session import ExplorerContext
        from store.views.lineups import Lineups

        explorer = ExplorerApp(
            ExplorerContext(
                sessions, Lineups(sessions, wait=0, noted=usage.view_read), settings.signing_secrets(),
                settings.base_url, usage=usage,
            ),
            websocket_origins=origins_for(settings.base_url, *(address or (None, None))),
            sign_in_limiter=limiter,  # the API's: one budget of guesses per address (issue 16 item 8)
        )
        # The explorer's requests in the API's access log: paths only, never query
        # strings (C8; issue 16 item 7).
        explorer.tornado.settings["log_function"] = log_request
        return explorer

    mount = ExplorerMount(make_explorer, log_request)
    app = make_app(
        settings, sessions, limiter=limiter, executor=executor, reads=reads, usage=usage,
        extra_routes=lambda deps: [(explorer_route, mount)],
    )
    return ServerApp(app, mount)


def run_worker(settings: Settings, listening: "Listening", index: int, supervised: bool = False) -> None:
    """Serve on `listening`'s sockets in this process until SIGTERM or SIGINT (or,
    `supervised`, until the parent process is gone), then drain."""
    asyncio.run(_serve(settings, listening, index, supervised))


async def _serve(settings: Settings, listening: "Listening", index: int, supervised: bool) -> None:
    from api.server import DrainingServer
    from store.database.db import Reads, engine_for, make_sessionmaker, replica_engines_for
    from store.views.builder import Builder

    sockets = listening.worker_sockets()  # first: a worker that cannot listen fails at once
    engine = engine_for(settings)
    replicas = replica_engines_for(settings)
    sessions = make_sessionmaker(engine)
    # Each process starts with its own replica (by index), spreading the reads.
    reads = Reads(sessions, [make_sessionmaker(replica, replica=True) for replica in replicas], first=index)
    executor = ThreadPoolExecutor(WORKER_THREADS, thread_name_prefix="lineups-api")
    served = make_server_app(settings, sessions, executor, sockets[0].getsockname()[:2], reads)
    server = DrainingServer(served.app, xheaders=settings.trust_proxy)
    server.add_sockets(sockets)
    settle_objects()  # this process's engine, pools and app
    mounting = asyncio.ensure_future(served.explorer.mount_soon(server))  # the API answers meanwhile
    builder = Builder(sessions)  # buyers' new views, once across processes (issue 47)
    builder.start()
    limits = "shared in Redis" if settings.redis_url else "per process"
    where = f"; reads from replica {reads.describe()}" if replicas else ""
    log.info("Worker %d serving (rate limit %d/min %s%s)", index, settings.rate_limit, limits, where)

    await _stop_requested(supervised)
    log.info("Worker %d stopping: no new connections; finishing %d request(s) in flight", index, server.in_flight)
    served.explorer.close()
    builder.stop(timeout=0)
    await server.drain(SHUTDOWN_GRACE)
    await asyncio.wait([mounting])  # an import cannot be interrupted: let it end, then stop the explorer
    served.explorer.stop()
    served.app.settings["lineups_deps"].usage.close()  # the last notes of use are written
    executor.shutdown(wait=False, cancel_futures=True)
    for replica in replicas:
        replica.dispose()
    engine.dispose()
    log.info("Worker %d stopped", index)


async def _stop_requested(supervised: bool) -> None:
    """Wait for SIGTERM or SIGINT or, in a supervised worker, for the parent process
    to be gone (a parent killed outright cannot pass the signal on: no orphans)."""
    from tornado.ioloop import PeriodicCallback

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    parent = os.getppid()

    def check_parent() -> None:
        if os.getppid() != parent:
            log.warning("The server's parent process %d is gone: stopping", parent)
            stop.set()

    watch = PeriodicCallback(check_parent, 1000)
    if supervised:
        watch.start()
    try:
        await stop.wait()
    finally:
        watch.stop()
