"""What the contract allows as the answer to each request of the soak (C1, C4, C5,
C7, C8, C9): `check(request, status, headers, body)` returns None for a response the
contract allows and a short description of what is wrong otherwise. Status *and*
body are checked: the seed's error body with the code of its status, `Retry-After`
on 429, `Allow` on 405, the parameter a 400 names, rate-limit headers for a valid
key, the C1 fields of every row, CSV's BOM, header and CRLF, a share link's
caching headers.
"""

from __future__ import annotations

import dataclasses
import json

from store.fields import RECORD_FIELDS

BOM = "\ufeff".encode()
CSV_HEADER = BOM + ",".join(RECORD_FIELDS).encode() + b"\r\n"
#: Status -> the error code the contract's body must carry (C5).
ERROR_CODES = {400: "VALIDATION_ERROR", 401: "UNAUTHORIZED", 403: "FORBIDDEN", 404: "NOT_FOUND",
               405: "NOT_FOUND", 429: "RATE_LIMITED", 500: "INTERNAL_ERROR"}
SOURCE_FIELDS = {"id", "name", "port_name", "port_unlocode", "ports", "frequency", "feed_type", "coverage_rating",
                 "commodity_rating", "commercial_rating", "subscription_status"}
SCHEMA_FIELDS = {"source_id", "source_name", "record_count", "first_date", "last_date", "updated_at", "fields"}

def check_error(status: int, headers, body: bytes, parameter: str | None = None) -> str | None:
    """The seed's error body (section 7) with the code of `status` (C5), or what is
    wrong with it."""
    if not (headers.get("Content-Type") or "").startswith("application/json"):
        return f"{status} without a JSON body"
    try:
        payload = json.loads(body)
    except ValueError:
        return f"{status} body is not JSON"
    if not isinstance(payload, dict) or set(payload) != {"error"} or not isinstance(payload["error"], dict):
        return f"{status} body is not {{'error': …}}"
    error = payload["error"]
    if set(error) != {"code", "message", "details"}:
        return f"{status} error has keys {sorted(error)}"
    if error["code"] != ERROR_CODES.get(status):
        return f"{status} with code {error['code']}"
    if not isinstance(error["message"], str) or not error["message"]:
        return f"{status} without a message"
    if b"Traceback" in body:
        return f"{status} carries a traceback"
    if status == 429:
        retry = headers.get("Retry-After") or ""
        if not retry.isdigit() or not 1 <= int(retry) <= 60:
            return f"429 with Retry-After {retry!r}"
    if status == 405 and headers.get("Allow") != "GET, HEAD":
        return f"405 with Allow {headers.get('Allow')!r}"
    if parameter is not None:
        details = error["details"]
        if not isinstance(details, dict) or details.get("parameter") != parameter or not details.get("reason"):
            return f"400 details {details!r}, expected parameter {parameter!r}"
    elif status != 400 and error["details"] is not None:
        return f"{status} with details {error['details']!r}"
    if status == 500 and headers.get("X-Request-Id", "") not in error["message"]:
        return "500 whose message does not name its request id"
    return None


def check_csv(headers, body: bytes) -> str | None:
    if headers.get("Content-Type") != "text/csv; charset=utf-8":
        return f"CSV with Content-Type {headers.get('Content-Type')!r}"
    if not body.startswith(CSV_HEADER):
        return "CSV without the BOM and the C1 header"
    if body.count(b"\n") != body.count(b"\r\n"):
        return "CSV line ends are not CRLF"
    return None


def check_lineups(body: bytes, limit: int) -> tuple[str | None, str | None]:
    """(what is wrong, next cursor) of a /v1/lineups JSON page."""
    payload = json.loads(body)
    if not {"data", "next_cursor", "nextCursor"} <= set(payload):
        return f"lineups body has keys {sorted(payload)}", None
    if payload["next_cursor"] != payload["nextCursor"]:
        return "next_cursor and nextCursor differ", None
    data = payload["data"]
    if len(data) > limit:
        return f"{len(data)} rows for limit {limit}", None
    if any(list(row) != list(RECORD_FIELDS) for row in data):
        return "a row without the C1 fields in order", None
    return None, payload["next_cursor"]


@dataclasses.dataclass
class Request:
    """One request of the mix and what the contract allows for it."""

    kind: str
    path: str
    key: str | None = None
    method: str = "GET"
    #: Statuses the contract allows (429 is allowed everywhere a limit applies).
    allowed: frozenset = frozenset({200})
    #: The parameter a 400 must name.
    parameter: str | None = None
    limit: int = 100
    valid_key: bool = True


def check(request: Request, status: int, headers, body: bytes) -> str | None:
    """None when the response is one the contract allows for `request`, else what is
    wrong with it."""
    if status == 599:
        return "no response (connection failed or timed out)"
    if status not in request.allowed:
        return f"status {status} (allowed: {sorted(request.allowed)})"
    if len(headers.get("X-Request-Id") or "") != 32 and request.kind != "healthz":
        return "no X-Request-Id"
    if request.valid_key and status != 401 and not (headers.get("X-RateLimit-Limit") and headers.get("X-RateLimit-Remaining")):
        return "a response to a valid key without X-RateLimit headers"
    if status >= 400:
        return check_error(status, headers, body, request.parameter if status == 400 else None)
    if request.kind in ("csv", "share"):
        if request.kind == "share" and (headers.get("Cache-Control") != "no-store" or headers.get("Referrer-Policy") != "no-referrer"):
            return "share link without Cache-Control: no-store and Referrer-Policy: no-referrer"
        return check_csv(headers, body)
    try:
        payload = json.loads(body)
    except ValueError:
        return f"{request.kind} 200 body is not JSON"
    if request.kind in ("lineups", "cursor"):
        return check_lineups(body, request.limit)[0]
    if request.kind == "sources":
        sources = payload.get("sources")
        if not isinstance(sources, list) or not sources or any(set(s) != SOURCE_FIELDS for s in sources):
            return "sources body is not the C7 list"
    elif request.kind == "schema":
        if set(payload) != SCHEMA_FIELDS or not payload["fields"]:
            return f"schema body has keys {sorted(payload)}"
    elif request.kind == "provenance":
        if payload.get("id") not in request.path or not payload.get("records"):
            return "provenance of another row, or without records"
    elif request.kind == "healthz" and payload != {"status": "ok"}:
        return f"healthz answered {payload!r}"
    return None
