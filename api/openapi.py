"""The OpenAPI 3.1 description of the API (GET /v1/openapi.json).

Written to be true, since clients are generated from it and it is fuzzed: every
parameter carries its C5 rule (bounds, enumerations, patterns, formats), every
response its schema and headers (C4, C5, C7, C9), and the error body is the seed's
section 7. Tests check real responses against it (tests/api/test_openapi.py). The
bodies' schemas are `api.openapi_schemas`; here the parameters, headers, responses
and paths.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Sequence

from api.cursors import CURSOR_PATTERN
from api.openapi_schemas import any_case, ref, schemas
from store import query
from store.access.links import TOKEN_CHARACTERS
from store.fields import VESSEL_STATUSES
from store.reference.taxonomy import default_taxonomy
from store.query import MAX_COMMODITY_CHARS, MAX_TEXT_CHARS


# ---------------------------------------------------------------- parameters
def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


def _parameters() -> dict[str, Any]:
    """Every parameter of /v1/lineups (`store.query.PARAMETERS`, in its order) with the
    rule `store.query` applies to it, and the paths' parameters."""
    date = {"type": "string", "format": "date", "pattern": f"^{query.DATE_PATTERN}$"}
    # No control character, at least one other than space (issue 49 item 9).
    filter_text = {"type": "string", "pattern": r"^[^\u0000-\u001f\u007f]*[^\s\u0000-\u001f\u007f][^\u0000-\u001f\u007f]*$",
                   "maxLength": MAX_TEXT_CHARS}
    too_long = f"At most {MAX_TEXT_CHARS} characters, no control characters: else 400."
    lineups = {
        "source": _query(
            "source",
            {"anyOf": [{"type": "string", "pattern": any_case(query.ALL_SOURCES)}, {"type": "string", "format": "uuid"}],
             "default": query.ALL_SOURCES},
            "A feed UUID (an `id` of /v1/sources), or `all` (any case). Not a UUID: 400; no such feed: 404; "
            "no active or trial subscription: 403.",
        ),
        "port": _query("port", {"type": "string", "pattern": f"^{query.LOCODE_PATTERN}$"}, "UN/LOCODE, case-insensitive exact match."),
        "country": _query("country", filter_text, f"Country name, case-insensitive exact match. {too_long}"),
        "port_name": _query("port_name", filter_text, f"Port name, case-insensitive substring. {too_long}"),
        "from": _query("from", date, "Start day (UTC, inclusive): rows whose eta..etd span overlaps [from, to]."),
        "to": _query("to", date, "End day (UTC, inclusive). `from` after `to` is 400."),
        "latest": _query(
            "latest",
            {"type": "string", "pattern": any_case(*query.BOOLEANS), "default": "false"},
            "true: only the row with the latest combined_date per vessel and port. Any case.",
        ),
        "commodity": {
            **_query(
                "commodity",
                {"type": "array", "minItems": 1, "items": {"type": "string", "enum": list(default_taxonomy().all_names())}},
                "Comma-separated taxonomy names (leaf, subgroup or group), each matched ignoring case, "
                "accents, punctuation and spacing (the enumeration gives each name's spelling); "
                f"an unknown name is 400 with suggestions, and so is a value of more than {MAX_COMMODITY_CHARS:,} characters.",
            ),
            "style": "form",
            "explode": False,
        },
        "status": {
            **_query(
                "status",
                {"type": "array", "minItems": 1, "items": {"type": "string", "pattern": any_case(*VESSEL_STATUSES)}},
                "Comma-separated vessel statuses to keep (the merged row's status), any case: "
                f"{', '.join(VESSEL_STATUSES)}. `status=expected,anchored,berthed` gives the calls that "
                "have not departed. Another value is 400, whose details list the allowed ones.",
            ),
            "style": "form",
            "explode": False,
            "example": ["expected", "anchored", "berthed"],
        },
        "merge": _query(
            "merge", {"type": "string", "pattern": any_case(*query.MODES), "default": query.MODES[0]},
            "Merge mode: `all` (the same vessel call from several feeds is one row) or `by_source` (one row "
            "per feed and call). Any case.",
        ),
        "limit": _query(
            "limit", {"type": "integer", "minimum": 1, "maximum": query.MAX_LIMIT, "default": query.DEFAULT_LIMIT},
            "Page size, never clamped.",
        ),
        "cursor": _query(
            "cursor", {"type": "string", "pattern": CURSOR_PATTERN},
            "next_cursor of the previous page of the same query, unchanged; any other cursor is 400.",
        ),
        "format": _query(
            "format", {"type": "string", "pattern": any_case(*query.FORMATS), "default": query.FORMATS[0]},
            "Output format: `json` or `csv`. Any case.",
        ),
    }
    return {
        **{name: lineups[name] for name in query.PARAMETERS},
        "rowId": {"name": "id", "in": "path", "required": True, "schema": {"type": "string"},
                  "description": "A row id of /v1/lineups (letters, digits, `-` and `_`; anything else is no row's: 404)."},
        "sourceId": {"name": "sourceId", "in": "path", "required": True, "schema": {"type": "string", "format": "uuid"}, "description": "A feed UUID."},
    }


# ---------------------------------------------------------------- responses
def _header(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "schema": schema}


def _headers() -> dict[str, Any]:
    integer, text = {"type": "integer", "minimum": 0}, {"type": "string"}
    return {
        "X-Request-Id": _header("Id of this request (32 hex digits); 500 messages name it.", {"type": "string", "pattern": "^[0-9a-f]{32}$"}),
        "X-RateLimit-Limit": _header("Requests allowed per rolling 60 s.", integer),
        "X-RateLimit-Remaining": _header("Requests left in the current window.", integer),
        "Retry-After": _header("Whole seconds until a request is admitted again (1-60).", {"type": "integer", "minimum": 1, "maximum": 60}),
        "X-Next-Cursor": _header("CSV pages: the cursor of the next page; absent on the last page.", text),
        "Link": _header('CSV pages: `<url>; rel="next"`; absent on the last page.', text),
        "Allow": _header("The methods the API accepts: GET, HEAD.", text),
    }


def _response_headers(*names: str, required: bool = False) -> dict[str, Any]:
    """Header objects for a response, inline (a reference cannot say `required`)."""
    described = _headers()
    optional = ("Link", "X-Next-Cursor")
    return {name: {**described[name], "required": required and name not in optional} for name in names}


def _error(description: str, *extra: str) -> dict[str, Any]:
    return {
        "description": description,
        "headers": {**_response_headers("X-Request-Id", required=True), **_response_headers("X-RateLimit-Limit", "X-RateLimit-Remaining", *extra)},
        "content": {"application/json": {"schema": ref("schemas", "Error")}},
    }


def _responses() -> dict[str, Any]:
    return {
        "ValidationError": _error("VALIDATION_ERROR: a parameter breaks its rule (details name it)."),
        "Unauthorized": _error("UNAUTHORIZED: the API key is missing, malformed, unknown or revoked."),
        "Forbidden": _error("FORBIDDEN: the key is valid but access is denied."),
        "NotFound": _error("NOT_FOUND: no such resource."),
        "RateLimited": _error("RATE_LIMITED: more than 100 requests in 60 s.", "Retry-After"),
        "InternalError": _error("INTERNAL_ERROR: the message names the request id."),
    }


def _ok(description: str, content: dict[str, Any], *extra: str) -> dict[str, Any]:
    headers = _response_headers("X-Request-Id", "X-RateLimit-Limit", "X-RateLimit-Remaining", required=True)
    return {"description": description, "headers": {**headers, **_response_headers(*extra)}, "content": content}


def _operation(summary: str, ok: dict[str, Any], params: Sequence[str], errors: tuple[str, ...], **extra) -> dict[str, Any]:
    responses = {"200": ok}
    for status, name in (("400", "ValidationError"), ("401", "Unauthorized"), ("403", "Forbidden"), ("404", "NotFound")):
        if name in errors:
            responses[status] = ref("responses", name)
    responses["429"] = ref("responses", "RateLimited")
    responses["500"] = ref("responses", "InternalError")
    return {"summary": summary, "parameters": [ref("parameters", p) for p in params], "responses": responses, **extra}


def _json(name: str) -> dict[str, Any]:
    return {"application/json": {"schema": ref("schemas", name)}}


def _links(links: dict[str, tuple[str, str, str]]) -> dict[str, Any]:
    """OpenAPI links `{name: (operationId, parameter, pointer into the body)}`: which
    value of a response feeds which parameter of another operation. Declared so that
    clients and fuzzers need not guess: a merged row's `source_id` lists several feeds
    (C2.5) and is no `sourceId`, however alike the names. (The feed schema is named
    `Feed`, not `Source`, for the same reason: fuzzers infer links from `source_id` to a
    `Source` resource by name, issue 18.4.)"""
    return {
        name: {"operationId": operation, "parameters": {parameter: f"$response.body#/{pointer}"}}
        for name, (operation, parameter, pointer) in links.items()
    }


def _paths() -> dict[str, Any]:
    all_errors = ("ValidationError", "Unauthorized", "Forbidden", "NotFound")
    filters = list(query.PARAMETERS)
    lineups = _ok(
        "A page of lineup records: JSON, or CSV with `format=csv`.",
        {**_json("LineupPage"), "text/csv": {"schema": {"type": "string"}}},
        "X-Next-Cursor", "Link",
    )
    lineups["links"] = _links({"provenance": ("getProvenance", "id", "data/0/id")})
    provenance = _ok("Provenance of the row.", _json("Provenance"))
    provenance["links"] = _links({"schema": ("getSourceSchema", "sourceId", "records/0/source_id")})
    feeds = _ok("The feeds.", _json("Sources"))
    feeds["links"] = _links({
        "schema": ("getSourceSchema", "sourceId", "sources/0/id"),
        "lineups": ("listLineups", "source", "sources/0/id"),
    })
    paths = {
        "/v1/lineups": _operation("Lineup records of the buyer's feeds, merged, filtered, paged", lineups, filters, all_errors, operationId="listLineups"),
        "/v1/lineups/changes": _operation(
            "The change feed of a /v1/lineups query: its rows, then what changed", _ok("A page of changes.", _json("ChangesPage")),
            [name for name in filters if name != "format"], all_errors, operationId="listLineupChanges",
            description="Without a cursor: the query's current rows in pages, each `{\"op\": \"upsert\", \"row\": …}`. "
            "With the last `next_cursor`: what changed since, in commit order, `upsert` for a row new or changed and "
            "`delete` for a row that left the result. Apply every item in order (upsert by id, delete by id) and you "
            "hold exactly what /v1/lineups returns. `caught_up` is true when nothing more waits. A cursor the service "
            "can no longer serve exactly (older than 7 days, or after the buyer's feeds changed) is 400 with "
            "`details.reason` `cursor_expired`: start again without a cursor.",
        ),
        "/v1/lineups/{id}/history": _operation(
            "The stored versions of the records behind one merged row", _ok("The row's record versions.", _json("History")),
            ["rowId", "source", "merge"], all_errors, operationId="getHistory",
        ),
        "/v1/lineups/{id}/provenance": _operation(
            "The stored records one merged row came from", provenance,
            ["rowId", "source", "merge"], all_errors, operationId="getProvenance",
        ),
        "/v1/sources": _operation(
            "The buyer's feeds (active or trial), by name", feeds, [],
            ("ValidationError", "Unauthorized", "Forbidden"), operationId="listSources",
        ),
        "/v1/schema/{sourceId}": _operation(
            "A feed's fields, types and coverage", _ok("The feed's schema.", _json("SourceSchema")),
            ["sourceId"], all_errors, operationId="getSourceSchema",
        ),
        "/v1/openapi.json": _operation(
            "This document", _ok("OpenAPI 3.1.", {"application/json": {"schema": {"type": "object"}}}), [], (),
            operationId="getOpenApi", security=[],
        ),
    }
    health = {
        "summary": "The service and its store answer",
        "operationId": "getHealth",
        "security": [],
        "responses": {
            "200": {"description": "Healthy.", "headers": _response_headers("X-Request-Id", required=True), "content": _json("Health")},
            "500": {"description": "The store does not answer.", "content": _json("Error")},
        },
    }
    out = {path: {"get": op} for path, op in paths.items()}
    out["/v1/share/{token}"] = {"get": _share_operation()}
    out["/healthz"] = {"get": health}
    return out


def _share_operation() -> dict[str, Any]:
    """GET /v1/share/{token}: no key, the token is the credential (C8)."""
    csv_headers = {
        "Cache-Control": _header("Always `no-store`: the data is licensed.", {"type": "string", "enum": ["no-store"]}),
        "Referrer-Policy": _header("Always `no-referrer`: the URL is a password.", {"type": "string", "enum": ["no-referrer"]}),
    }
    ok = {
        "description": "The whole result of the link's query as CSV (UTF-8 with a byte order mark), "
        "every page, streamed.",
        "headers": {**_response_headers("X-Request-Id", required=True), **{k: {**v, "required": True} for k, v in csv_headers.items()},
                    **_response_headers("X-RateLimit-Limit", "X-RateLimit-Remaining")},
        "content": {"text/csv": {"schema": {"type": "string"}}},
    }
    responses = {"200": ok}
    for status, name in (("400", "ValidationError"), ("401", "Unauthorized"), ("403", "Forbidden"),
                         ("429", "RateLimited"), ("500", "InternalError")):
        responses[status] = ref("responses", name)
    return {
        "summary": "A share link: the whole result of a frozen /v1/lineups query as CSV",
        "description": "A share link's URL, made by the buyer in the explorer or by an operator "
        "(`lineups link create`). It needs no key: treat it like a password. The URL may end in `.csv`; "
        "query parameters on it are ignored. Every request checks the link (revoked or unknown: 401), the "
        "buyer (suspended: 403) and the feeds (none still subscribed: 403). A result larger than the "
        "service's ceiling (100,000 rows unless configured) is 400: make a link with narrower filters.",
        "operationId": "getShareLink",
        "security": [],
        "parameters": [{
            "name": "token", "in": "path", "required": True,
            "schema": {"type": "string", "pattern": f"^[{TOKEN_CHARACTERS}]+$"},
            "description": "The link's token: `sl_` and the signed link.",
        }],
        "responses": responses,
    }


def _document(base_url: str) -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Maritime Lineup Data Service",
            "version": "1.0.0",
            "description": "Read-only lineup records from the feeds a buyer subscribes to. "
            "Every endpoint but /v1/openapi.json and /healthz needs the X-API-Key header. "
            "HEAD is accepted wherever GET is; other methods get 405 with code NOT_FOUND.",
        },
        "servers": [{"url": base_url}],
        "security": [{"ApiKey": []}],
        "paths": _paths(),
        "components": {
            "securitySchemes": {"ApiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"}},
            "schemas": schemas(),
            "parameters": _parameters(),
            "headers": _headers(),
            "responses": _responses(),
        },
    }


@functools.lru_cache(maxsize=8)
def openapi_json(base_url: str) -> bytes:
    """The OpenAPI 3.1 document for a service at `base_url`, as UTF-8 JSON."""
    return json.dumps(_document(base_url), ensure_ascii=False, indent=1).encode("utf-8")
