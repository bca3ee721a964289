"""Identifiers: the UUIDs that feeds, buyers, keys and share links are known by.

Every layer asks this module whether a text names a row by id, before the text is
looked up as a name (C11: "an id or a unique name").
"""

from __future__ import annotations

import uuid


def is_uuid(text: str) -> bool:
    """True when `text` reads as a UUID."""
    try:
        uuid.UUID(text)
    except (ValueError, AttributeError, TypeError):
        return False
    return True
