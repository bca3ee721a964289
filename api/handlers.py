"""The API's endpoints (seed section 4): parse, call the store, render.

Validation lives in `store.query.parse_query` (C5), the pipeline in
`store.lineups.LineupService` (C2, C3), rendering in `api.render` (C1, C9), cursors in
`api.cursors` (C4); auth, limits and errors in `api.base.BaseHandler`. Blocking work
runs through `BaseHandler.run` on the executor; pure reads of data through
`BaseHandler.read`, on a read replica when there is one.
"""

from __future__ import annotations

import functools
import uuid
from types import MappingProxyType
from typing import Any, Mapping, Sequence
from urllib.parse import urlencode

from sqlalchemy import text
from sqlalchemy.orm import Session
from tornado.httputil import parse_qs_bytes

from api import render
from api.base import BaseHandler, text_args
from api.cursors import binding
from api.openapi import openapi_json
from store import accounts, coverage, query as pipeline
from store.accounts import FeedVersion
from store.errors import ValidationError
from store.feeds import feed_dict, is_uuid
from store.taxonomy import default_taxonomy

#: C7: the fields of a source record, in this order.
SOURCE_FIELDS = (
    "id", "name", "port_name", "port_unlocode", "ports", "frequency", "feed_type",
    "coverage_rating", "commodity_rating", "commercial_rating",
)
PROVENANCE_PARAMS = ("merge", "source")


def parse(args: dict[str, list[str]]):
    """`(query, limit, cursor)` of /v1/lineups arguments (C5); raises ValidationError."""
    return pipeline.parse_query(args, default_taxonomy().parse_filter)


@functools.lru_cache(maxsize=4096)
def parse_page_query(raw: str) -> tuple[Mapping[str, list[str]], pipeline.LineupQuery, int, str | None, str]:
    """`(args, query, limit, cursor, binding)` of the raw query string of a
    /v1/lineups request; raises ValidationError. Parsing is a pure function of the
    string, so it is remembered per distinct string (a client walking pages, or
    many clients polling the same page, send the same strings again); a string that
    fails is not remembered and fails again with the same error."""
    args = text_args(parse_qs_bytes(raw, keep_blank_values=True))
    query, limit, cursor = parse(args)
    return MappingProxyType(args), query, limit, cursor, binding(query.key(), query.format)


class LineupPage:
    """One page of /v1/lineups for a buyer, rendered (runs on the executor)."""

    def __init__(self, handler: "LineupsHandler"):
        self.deps = handler.deps
        self.buyer_id = handler.buyer_id
        self.entitled = handler.entitled
        self.args, self.query, self.limit, self.cursor, self.bound_to = parse_page_query(handler.request.query)
        self.format = self.query.format

    def from_cache(self) -> tuple[bytes, str | None] | None:
        """The page when the query's sorted rows are cached (no store, no merge: fit
        for the event loop); None when `__call__` must run on the executor."""
        selection = None if self.entitled is None else self.deps.service.cached(self.entitled, self.query)
        return None if selection is None else self.render(selection)

    def __call__(self, session: Session) -> tuple[bytes, str | None]:
        self.after()  # a bad cursor is refused before any work
        return self.render(self.deps.service.select(session, self.buyer_id, self.query, self.entitled))

    def after(self) -> pipeline.Position | None:
        """The keyset position in the cursor (C4); raises ValidationError for a cursor
        that is not ours or belongs to another query."""
        return self.deps.cursors.decode(self.cursor, self.bound_to) if self.cursor else None

    def render(self, selection) -> tuple[bytes, str | None]:
        """The body of this page of `selection` and the next page's cursor. A page
        served before (same result, query, cursor and limit) reuses its row range and
        next cursor: only cursors that were read and checked once are remembered; a
        page served twice keeps its body (`RowCache.keep_body`) and is sent as it is
        from then on."""
        page = (self.bound_to, self.cursor, self.limit)
        kept = self.deps.rows.body(selection.rows, page)
        if kept is not None:
            return kept
        found = self.deps.rows.position(selection.rows, page)
        if found is None:
            start, stop, position = pipeline.page_range(selection.sort_keys, self.after(), self.limit)
            cursor = None if position is None else self.deps.cursors.encode(position, self.bound_to)
            self.deps.rows.remember(selection.rows, page, (start, stop, cursor))
        else:
            start, stop, cursor = found
        encoded = self.deps.rows.rows(selection.rows, start, stop, self.format)
        body = render.csv_body(encoded) if self.format == "csv" else render.json_body(encoded, cursor)
        if found is not None:
            self.deps.rows.keep_body(selection.rows, page, body, cursor)
        return body, cursor

    def next_url(self, base_url: str, cursor: str) -> str:
        """The URL of the next page: these arguments with the new cursor."""
        args = [(k, v) for k, values in self.args.items() if k != "cursor" for v in values]
        return f"{base_url}/v1/lineups?{urlencode([*args, ('cursor', cursor)])}"


class LineupsHandler(BaseHandler):
    """GET /v1/lineups: the buyer's lineup records, JSON or CSV, a page at a time."""

    async def get(self) -> None:
        page = LineupPage(self)
        body, cursor = page.from_cache() or await self.read(page)
        if page.format != "csv":
            return self.send_json(body)
        self.set_header("Content-Type", render.CSV_TYPE)
        if cursor is not None:
            self.set_header("X-Next-Cursor", cursor)
            self.set_header("Link", f'<{page.next_url(self.deps.settings.base_url, cursor)}>; rel="next"')
        self.finish(body)


class ProvenanceHandler(BaseHandler):
    """GET /v1/lineups/{id}/provenance: the records a merged row came from and which
    record gave each value (C2). Takes `merge` and `source` like /v1/lineups; an id
    that is not in the buyer's view is 404."""

    async def get(self, row_id: str) -> None:
        args = self.query_args()
        self.only_params(args, PROVENANCE_PARAMS)
        query = parse(args)[0]
        self.send_json(await self.read(self.deps.service.explain, self.buyer_id, row_id, query, self.entitled))


class SourcesHandler(BaseHandler):
    """GET /v1/sources: the feeds with an active or trial subscription, by name (C7)."""

    async def get(self) -> None:
        self.only_params(self.query_args(), ())
        self.send_json({"sources": await self.read(sources, self.buyer_id, self.entitled)})


def sources(session: Session, buyer_id: str, entitled: Sequence[FeedVersion] | None = None) -> list[dict[str, Any]]:
    """The C7 source records of the buyer's entitled feeds, ordered by name; only
    those of `entitled` when given (read on the primary: a cancelled subscription
    leaves the list at once, also when `session` reads a lagging replica)."""
    out = []
    keep = None if entitled is None else {feed.id for feed in entitled}
    for entitlement in accounts.entitlements(session, buyer_id):
        if keep is not None and entitlement.feed.id not in keep:
            continue
        described = feed_dict(entitlement.feed)
        out.append({**{k: described[k] for k in SOURCE_FIELDS}, "subscription_status": entitlement.status})
    return out


class SchemaHandler(BaseHandler):
    """GET /v1/schema/{sourceId}: a feed's fields, types and coverage (C7). The same
    rules as `source`: not a UUID 400, no such feed 404, not subscribed 403 (C5)."""

    async def get(self, source_id: str) -> None:
        self.only_params(self.query_args(), ())
        if not is_uuid(source_id) or str(uuid.UUID(source_id)) != source_id.lower():
            raise ValidationError.parameter("sourceId", "must be a feed UUID")
        self.send_json(await self.read(self.feed_schema, source_id.lower()))

    def feed_schema(self, session: Session, source_id: str) -> dict[str, Any]:
        (feed,) = self.deps.service.feeds_for(session, self.buyer_id, source_id, self.entitled)
        return coverage.feed_schema(session, feed)


class OpenApiHandler(BaseHandler):
    """GET /v1/openapi.json: the OpenAPI 3.1 description of this API; no key needed."""

    requires_key = False

    async def get(self) -> None:
        self.send_json(openapi_json(self.deps.settings.base_url))


class HealthHandler(BaseHandler):
    """GET /healthz: 200 when the store answers `SELECT 1`; neither keyed nor counted."""

    requires_key = False
    rate_limited = False

    async def get(self) -> None:
        await self.run(lambda session: session.execute(text("SELECT 1")).scalar_one())
        self.send_json({"status": "ok"})
