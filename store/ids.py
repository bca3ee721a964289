"""Identifiers: the UUIDs that feeds, buyers, keys and share links are known by.

One rule for every layer (C5, C11): a UUID is written as 32 hex digits in the groups
8-4-4-4-12, in any case; the store keeps and serves it in lower case. A text that
breaks the rule names no row by id (it may still be a name).
"""

from __future__ import annotations

import re

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def canonical_uuid(text: object) -> str | None:
    """`text` in the store's spelling (lower case) when it is a UUID by the rule
    above, else None."""
    return text.lower() if isinstance(text, str) and _UUID.fullmatch(text) else None


def is_uuid(text: object) -> bool:
    """True when `text` is a UUID by the rule above."""
    return canonical_uuid(text) is not None
