"""The API's application factory and route table (seed section 4, contract C5).

`make_app` composes the Tornado application from its dependencies (settings, the
sessionmaker, a rate limiter, an executor for blocking work; the buyers' lineups are
read from the views kept in the store, `store.views.lineups.Lineups`) and
hands them to every handler through `initialize()`. Routes:

    GET /v1/lineups                     lineup records, JSON or CSV (C3, C4, C9)
    GET /v1/lineups/changes             the change feed of a query (issue 46)
    GET /v1/lineups/{id}/provenance     how one merged row was made (C2)
    GET /v1/lineups/{id}/history        the record versions behind a row (issue 46)
    GET /v1/sources                     the buyer's feeds (C7)
    GET /v1/schema/{sourceId}           a feed's fields and coverage (C7)
    GET /v1/openapi.json                this API described (no key needed)
    GET /healthz                        the store answers (no key, not counted)
    anything else                       404 NOT_FOUND; other methods 405

Hooks: share links (`/v1/share/{token}`, C8) and the explorer are added by the server
entry point (`cli/serve.py`) through `extra_routes(deps) -> routes`, ahead of the
catch-all; a share handler derives from `api.base.BaseHandler` (with `requires_key =
False`, its own token check, and `stream_csv` for the body).
"""

from __future__ import annotations

import logging
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any, Callable, Sequence

from sqlalchemy.orm import Session, sessionmaker
from tornado.web import Application, RequestHandler

from api.base import CLIENT_CLOSED, BaseHandler, NotFoundHandler
from api.dependencies import Dependencies
from api.redaction import redact
from api.exports import ExportLimits, ExportSlots
from api.cursors import CursorCodec
from api.handlers import (
    ChangesHandler,
    HealthHandler,
    HistoryHandler,
    LineupsHandler,
    OpenApiHandler,
    ProvenanceHandler,
    SchemaHandler,
    SourcesHandler,
)
from api.ratelimit import Limiter, MemoryLimiter
from api.share import DownloadHandler, ShareHandler
from store.access.usage import UsageWriter
from store.database.db import Reads
from store.settings import Settings

access_log = logging.getLogger("lineups.access")
#: Worker threads for store and merge work per server process.
DEFAULT_WORKERS = 8


def api_routes(deps: Dependencies) -> list[tuple[str, type[RequestHandler], dict[str, Any]]]:
    """The /v1 routes and /healthz, each handler given `deps`."""
    args = {"deps": deps}
    return [
        (r"/v1/lineups", LineupsHandler, args),
        (r"/v1/lineups/changes", ChangesHandler, args),
        (r"/v1/lineups/([^/]+)/provenance", ProvenanceHandler, args),
        (r"/v1/lineups/([^/]+)/history", HistoryHandler, args),
        (r"/v1/sources", SourcesHandler, args),
        (r"/v1/schema/([^/]+)", SchemaHandler, args),
        (r"/v1/openapi\.json", OpenApiHandler, args),
        (r"/v1/share/([^/]+?)(?:\.csv)?", ShareHandler, args),
        (r"/v1/download/([^/]+)", DownloadHandler, args),
        (r"/healthz", HealthHandler, args),
    ]


def log_request(handler: RequestHandler) -> None:
    """The access log: method, path (share tokens redacted), status, time, request id.
    Never headers or query strings, so no API key or token reaches a log (C8).

    Runs on the event loop for every request, so the record is made directly
    (`Logger.makeRecord` and `handle`: no search of the call stack for the caller's
    file and line, which `Logger.log` does and this line does not need)."""
    status = handler.get_status()
    # A client that went away (499) is no fault of the service: INFO (issue 16 item 2).
    level = logging.INFO if status < 400 or status == CLIENT_CLOSED else logging.WARNING if status < 500 else logging.ERROR
    if not access_log.isEnabledFor(level):
        return
    request = handler.request
    args = (request.method, redact(request.path), status, 1000.0 * request.request_time(), getattr(handler, "request_id", "-"))
    access_log.handle(access_log.makeRecord(access_log.name, level, __file__, 0, _ACCESS_FORMAT, args, None, "log_request"))


_ACCESS_FORMAT = "%s %s %d %.1fms %s"


def make_dependencies(
    settings: Settings,
    sessions: sessionmaker[Session],
    limiter: Limiter | None = None,
    executor: Executor | None = None,
    reads: Reads | None = None,
    export_limits: ExportLimits | None = None,
    usage: UsageWriter | None = None,
) -> Dependencies:
    """The handlers' dependencies with the C5 defaults for what is not given
    (without `reads`, pure reads go to the primary through `sessions`;
    `export_limits`: of streamed exports, `api.exports.ExportLimits()` by default;
    `usage`: the writer of notes of use, shared with the explorer when served beside it)."""
    return Dependencies(
        settings=settings,
        sessions=sessions,
        limiter=limiter or MemoryLimiter(),
        executor=executor or ThreadPoolExecutor(DEFAULT_WORKERS, thread_name_prefix="lineups-api"),
        cursors=CursorCodec(settings.signing_secrets()),
        reads=reads,
        export_slots=ExportSlots(export_limits or ExportLimits()),
        usage=usage,
    )


def make_app(
    settings: Settings,
    sessions: sessionmaker[Session],
    *,
    limiter: Limiter | None = None,
    executor: Executor | None = None,
    reads: Reads | None = None,
    export_limits: ExportLimits | None = None,
    usage: UsageWriter | None = None,
    extra_routes: Callable[[Dependencies], Sequence[tuple]] | None = None,
    **app_settings: Any,
) -> Application:
    """The API application. `extra_routes(deps)` gives more routes (share links, the
    explorer), matched after the API's and before the catch-all 404, whose handlers
    can take the same dependencies; `reads` sends pure reads to read replicas
    (`store.database.db.Reads`); `app_settings` go to Tornado."""
    deps = make_dependencies(settings, sessions, limiter, executor, reads, export_limits, usage)
    app = Application(
        [*api_routes(deps), *(extra_routes(deps) if extra_routes else ())],
        default_handler_class=NotFoundHandler,
        default_handler_args={"deps": deps},
        log_function=log_request,
        serve_traceback=False,
        **app_settings,
    )
    app.settings["lineups_deps"] = deps
    return app


__all__ = ["make_app", "make_dependencies", "api_routes", "log_request", "BaseHandler", "Dependencies"]
