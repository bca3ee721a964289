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
import hashlib
import json
import threading
from collections import OrderedDict
from typing import Any

from itsdangerous import BadSignature, URLSafeSerializer

from store.errors import ValidationError

SALT = "lineups.cursor.v1"
#: The form of every cursor `CursorCodec.encode` makes: itsdangerous' URL-safe payload
#: (a leading "." when compressed), a dot, and the base64url HMAC-SHA1 signature (27
#: characters). The OpenAPI document gives it, so that a client or fuzzer knows that
#: `cursor=0` is no cursor (issue 18.4); a cursor of this form may still be refused.
CURSOR_PATTERN = r"^\.?[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{27}$"


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


#: Bytes of query keys whose bindings are remembered, all together (issue 16 item 5:
#: a client controls the length of its query strings, so the memory is bounded by
#: bytes, not by a number of entries).
BINDINGS_MAX_BYTES = 4 * 1024 * 1024
#: A query key longer than this is never remembered (its digest is made each time).
BINDING_MAX_KEY = 4096
#: Bytes counted per remembered entry beyond its key (digest, dict and list slots).
_ENTRY_BYTES = 200


class _Bindings:
    """`binding`'s memory: least recently used first out, within `max_bytes`."""

    def __init__(self, max_bytes: int = BINDINGS_MAX_BYTES):
        self.max_bytes = max_bytes
        self.size = 0
        self._kept: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str]) -> str | None:
        with self._lock:
            found = self._kept.get(key)
            if found is not None:
                self._kept.move_to_end(key)
            return found

    def keep(self, key: tuple[str, str], digest: str) -> None:
        cost = len(key[0]) + len(key[1]) + _ENTRY_BYTES
        with self._lock:
            if key in self._kept:
                return
            self._kept[key] = digest
            self.size += cost
            while self.size > self.max_bytes:
                (old_key, old_format), _ = self._kept.popitem(last=False)
                self.size -= len(old_key) + len(old_format) + _ENTRY_BYTES


_BINDINGS = _Bindings()


def binding(query_key: Any, output_format: str) -> str:
    """The digest a cursor is bound to: the query's canonical key and the format.
    (Remembered for short query keys, within `BINDINGS_MAX_BYTES`: many requests ask
    it for the same query.)"""
    remembered = isinstance(query_key, str) and len(query_key) <= BINDING_MAX_KEY
    if remembered and (found := _BINDINGS.get((query_key, output_format))) is not None:
        return found
    text = json.dumps([canonical(query_key), output_format], sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]
    if remembered:
        _BINDINGS.keep((query_key, output_format), digest)
    return digest


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
