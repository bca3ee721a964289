"""The API's endpoints (seed section 4): parse, call the store, render.

Validation lives in `store.query.parse_query` (C5), the pipeline in
`store.views.lineups.Lineups` (C2, C3: SQL over the merged views kept in the
database), rendering in `api.render` (C1, C9), cursors in `api.cursors` (C4); auth,
limits and errors in `api.base.BaseHandler`. Blocking work runs on the executor
(`BaseHandler.blocking`, `run`, `read`); pure reads go to a read replica when there
is one.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence
from urllib.parse import urlencode

from sqlalchemy import text
from sqlalchemy.orm import Session

from api import render
from api.base import BaseHandler
from api.cursors import binding
from api.openapi import openapi_json
from store.access import accounts
from store import query as pipeline
from store.views import coverage
from store.access.accounts import FeedVersion
from store.errors import ValidationError
from store.ids import canonical_uuid
from store.intake.feeds import feed_dict
from store.reference.taxonomy import default_taxonomy
from store.views.change_feed import FeedPosition
from store.views.lineups import visible_feeds

#: C7: the fields of a source record, in this order.
SOURCE_FIELDS = (
    "id", "name", "port_name", "port_unlocode", "ports", "frequency", "feed_type",
    "coverage_rating", "commodity_rating", "commercial_rating",
)
PROVENANCE_PARAMS = ("merge", "source")
#: What change-feed cursors are bound to beside the buyer and query (not a /v1/lineups format).
CHANGES = "changes"


def parse(args: dict[str, list[str]]):
    """`(query, limit, cursor)` of /v1/lineups arguments (C5); raises ValidationError."""
    return pipeline.parse_query(args, default_taxonomy().parse_filter)


class LineupsHandler(BaseHandler):
    """GET /v1/lineups: the buyer's lineup records, JSON or CSV, a page at a time:
    parse → admit (`prepare`) → one SQL page of the kept views → render."""

    async def get(self) -> None:
        args = self.query_args()
        query, limit, cursor = parse(args)
        bound_to = binding(query.key(), query.format)
        after = self.deps.cursors.decode(cursor, bound_to) if cursor else None  # C4: refused before any work
        page = await self.blocking(self.deps.lineups.page, self.buyer_id, query, after, limit, self.entitled)
        next_cursor = None if page.next is None else self.deps.cursors.encode(page.next, bound_to)
        if query.format != "csv":
            return self.send_json(render.json_page(page.records, next_cursor))
        self.set_header("Content-Type", render.CSV_TYPE)
        if next_cursor is not None:
            self.set_header("X-Next-Cursor", next_cursor)
            self.set_header("Link", f'<{next_url(self.deps.settings.base_url, args, next_cursor)}>; rel="next"')
        self.finish(render.csv_of_records(page.records))


def next_url(base_url: str, args: Mapping[str, list[str]], cursor: str) -> str:
    """The URL of the next page: these arguments with the new cursor."""
    pairs = [(k, v) for k, values in args.items() if k != "cursor" for v in values]
    return f"{base_url}/v1/lineups?{urlencode([*pairs, ('cursor', cursor)])}"


class ChangesHandler(BaseHandler):
    """GET /v1/lineups/changes: the change feed of a /v1/lineups query (issue 46):
    its rows first, then what changed, as upserts and deletes, a page at a time
    (`store.views.change_feed`). Takes every parameter of /v1/lineups, parsed and
    refused the same way (C5); the cursor is signed and bound to the buyer and the
    query, like C4's."""

    async def get(self) -> None:
        query, limit, cursor = parse(self.query_args())
        if query.format != "json":
            raise ValidationError.parameter("format", "the change feed is JSON only")
        bound_to = binding(f"{self.buyer_id}\n{query.key()}", CHANGES)
        position = FeedPosition.from_json(self.deps.cursors.decode(cursor, bound_to)) if cursor else None
        page = await self.blocking(self.deps.lineups.changes, self.buyer_id, query, position, limit, self.entitled)
        next_cursor = self.deps.cursors.encode(page.next.to_json(), bound_to)
        self.send_json(render.changes_page(page.items, next_cursor, page.caught_up))


class ProvenanceHandler(BaseHandler):
    """GET /v1/lineups/{id}/provenance: the records a merged row came from and which
    record gave each value (C2). Takes `merge` and `source` like /v1/lineups; an id
    that is not in the buyer's view is 404."""

    async def get(self, row_id: str) -> None:
        args = self.query_args()
        self.only_params(args, PROVENANCE_PARAMS)
        query = parse(args)[0]
        self.send_json(await self.blocking(self.deps.lineups.explain, self.buyer_id, row_id, query, self.entitled))


class HistoryHandler(BaseHandler):
    """GET /v1/lineups/{id}/history: the stored versions of every record a merged row
    merges, oldest first, with when each was replaced (issue 46): how a call's ETA
    slipped. Same parameters and rules as provenance: an id not in the buyer's view
    is 404."""

    async def get(self, row_id: str) -> None:
        args = self.query_args()
        self.only_params(args, PROVENANCE_PARAMS)
        query = parse(args)[0]
        self.send_json(await self.blocking(self.deps.lineups.history, self.buyer_id, row_id, query, self.entitled))


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
        feed_id = canonical_uuid(source_id)
        if feed_id is None:
            raise ValidationError.parameter("sourceId", "must be a feed UUID")
        self.send_json(await self.read(self.feed_schema, feed_id))

    def feed_schema(self, session: Session, source_id: str) -> dict[str, Any]:
        (feed,) = visible_feeds(session, self.buyer_id, source_id, self.entitled)
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
