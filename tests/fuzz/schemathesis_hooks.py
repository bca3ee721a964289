"""Schemathesis hooks for the conformance run (tests/fuzz/test_conformance.py).

Loaded by `schemathesis run` through `SCHEMATHESIS_HOOKS=<this file>`. They touch
only cases that schemathesis generates as *valid* (positive mode), and only for the
two rules of /v1/lineups that no OpenAPI schema can state, so that "valid by the
document" means valid by the contract:

- `from` must not be after `to` (C3): a cross-parameter rule; the hook puts the two
  dates in order.
- `cursor` is opaque and signed, bound to the query's filters (C4): no schema
  describes the valid ones. The hook replaces a generated cursor with one the service
  signs for this very query (the run gives the secret in `LINEUPS_SECRET`), at a
  position drawn from the generated text, so that keyset paging is fuzzed too.
  `/v1/lineups/changes` (issue 46) takes the same filters, dates put in order alike;
  its cursor also names the buyer's view and how far they have read, which only the
  service's own answer can give, so a valid case asks without one (its first page).

- A share link's token is signed (C8): in valid cases the hook gives the token of a
  real link (`LINEUPS_FUZZ_SHARE_TOKEN`, made by the test), so that the CSV it serves
  is checked against the document too.

Negative cases (made invalid on purpose) pass through unchanged, so a made-up cursor,
token or a reversed date range must still be refused.
"""

from __future__ import annotations

import hashlib
import os

import schemathesis

from api.cursors import CursorCodec, binding
from store.errors import ValidationError
from store.query import parse_query
from store.settings import Settings
from store.reference.taxonomy import default_taxonomy

LINEUPS = "/v1/lineups"
CHANGES = "/v1/lineups/changes"


def _codec() -> CursorCodec:
    return CursorCodec(Settings.load().signing_secrets())


def _text(value) -> str:
    """A query value as it goes on the wire (arrays are comma-joined, style=form)."""
    if isinstance(value, (list, tuple)):
        return ",".join(_text(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _position(seed: str) -> list:
    """A keyset position (C4) drawn from the generated cursor text: a date in ns or
    None, and an id, both from a digest so that the run stays reproducible."""
    digest = int.from_bytes(hashlib.sha256(seed.encode("utf-8", "surrogatepass")).digest()[:8], "big")
    date = None if digest % 4 == 0 else digest % (2**62) - 2**61
    return [date, seed]


def _signed_cursor(query: dict) -> str | None:
    """A cursor the service issued for `query` (without its cursor), or None when the
    query is refused anyway."""
    args = {name: [_text(value)] for name, value in query.items() if name != "cursor"}
    try:
        parsed, _, _ = parse_query(args, default_taxonomy().parse_filter)
    except ValidationError:
        return None
    return _codec().encode(_position(_text(query["cursor"])), binding(parsed.key(), parsed.format))


SHARE = "/v1/share/{token}"


@schemathesis.hook
def map_case(context, case):
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return case
    if case.operation.path == SHARE and os.environ.get("LINEUPS_FUZZ_SHARE_TOKEN"):
        case.path_parameters = {**(case.path_parameters or {}), "token": os.environ["LINEUPS_FUZZ_SHARE_TOKEN"]}
        return case
    if case.operation.path not in (LINEUPS, CHANGES) or not case.query:
        return case
    query = dict(case.query)
    if case.operation.path == CHANGES:
        query.pop("cursor", None)
    first, last = query.get("from"), query.get("to")
    if isinstance(first, str) and isinstance(last, str) and first > last:
        query["from"], query["to"] = last, first
    if "cursor" in query:
        cursor = _signed_cursor(query)
        if cursor is not None:
            query["cursor"] = cursor
    case.query = query
    return case
