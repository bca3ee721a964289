"""Signed, opaque pagination cursors (contract C4).

A cursor carries the keyset position where the next page starts (the C3 sort values
of the last row served, as `store.query.page` gives them) and a digest of what it
belongs to: the query's canonical filters, merge mode and output format. It is signed
with itsdangerous under a salt of its own, so a cursor cannot be made up, altered, or
used with another query: each of those is 400 VALIDATION_ERROR with details
`{"parameter": "cursor", ...}`. `limit` is not bound, so page sizes may vary. The
signing secrets are the settings' (the first signs, all verify), so cursors survive a
secret roll-over and are valid on every server process.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from typing import Any

from itsdangerous import BadSignature, URLSafeSerializer

from store.errors import ValidationError

SALT = "lineups.cursor.v1"


def canonical(value: Any) -> Any:
    """`value` as plain JSON data with a stable order (sets sorted, tuples as lists,
    dataclasses as dicts), so that its digest is the same in every process."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted((canonical(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True, default=str))
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


@functools.lru_cache(maxsize=4096)
def binding(query_key: Any, output_format: str) -> str:
    """The digest a cursor is bound to: the query's canonical key and the format.
    (Memoized: many requests ask it for the same query.)"""
    text = json.dumps([canonical(query_key), output_format], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


class CursorCodec:
    """Makes and reads cursors with the service's signing secrets (newest first)."""

    def __init__(self, secrets: tuple[str, ...]):
        if not secrets:
            raise ValueError("cursors need at least one signing secret")
        # itsdangerous signs with the last key and verifies with all of them.
        self._serializer = URLSafeSerializer(list(reversed(secrets)), salt=SALT)

    def encode(self, position: Any, bound_to: str) -> str:
        """A cursor for the page after `position` (JSON data) of the query `bound_to`."""
        return self._serializer.dumps({"p": position, "q": bound_to})

    def decode(self, cursor: str, bound_to: str) -> Any:
        """The position in `cursor`. Raises ValidationError (parameter "cursor") when
        the cursor is not one of ours, or belongs to another query."""
        try:
            payload = self._serializer.loads(cursor)
        except BadSignature:
            raise ValidationError.parameter(
                "cursor", "not a valid cursor: pass next_cursor of the previous page unchanged"
            ) from None
        if not isinstance(payload, dict) or "p" not in payload:
            raise ValidationError.parameter("cursor", "not a valid cursor")
        if payload.get("q") != bound_to:
            raise ValidationError.parameter(
                "cursor",
                "this cursor belongs to a query with other filters, merge mode or format; "
                "start again without a cursor",
            )
        return payload["p"]
