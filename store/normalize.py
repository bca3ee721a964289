"""Normal forms of vessel names, commodity strings and IMO numbers (contract C2.2).

The merge key is built from these, so they are computed once at ingest and stored
beside the raw values.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

_PUNCTUATION = re.compile(r"[^\w\s]|_", re.UNICODE)
_SPACES = re.compile(r"\s+")
_VESSEL_PREFIX = re.compile(r"^(?:M\s*/\s*V|M\s*/\s*T|MV|MT|SS)\s+")


def collapse(text: str) -> str:
    """Whitespace collapsed to single spaces and trimmed."""
    return _SPACES.sub(" ", text).strip()


def vessel_name_key(name: str) -> str:
    """The normalized vessel name of C2.2: upper-cased, punctuation removed, whitespace
    collapsed, a leading MV, M/V, MT, M/T or SS prefix removed.

    >>> vessel_name_key("  m/v  Star-Atlantic. ")
    'STARATLANTIC'
    >>> vessel_name_key("MT Ocean Grace")
    'OCEAN GRACE'
    """
    upper = collapse(name.upper())
    # The prefix is recognised before punctuation goes, so that "M/V" is one token.
    upper = _VESSEL_PREFIX.sub("", upper)
    return collapse(_PUNCTUATION.sub("", upper))


def vessel_key(imo: str | None, name: str | None) -> str | None:
    """The vessel part of the merge key: `IMO<number>` when an IMO number is present,
    otherwise `NAME:<normalized name>`; None when neither is known.

    The prefixes keep an IMO number from ever equalling a name (C2.2: a vessel with an
    IMO in one feed and only a name in another is two vessels)."""
    if imo:
        return f"IMO{imo}"
    if name:
        key = vessel_name_key(name)
        if key:
            return f"NAME:{key}"
    return None



@lru_cache(maxsize=2**16)
def name_key(name) -> str | None:
    """`NAME:` + C2.2's normalised name (cached: a store repeats its names). The cache
    is bounded in bytes too: a stored vessel name has at most 200 characters, so an
    entry (name and key, at most 4 bytes a character) takes under 2 KiB, and the
    2**16 entries under 128 MiB; names seen by merges, never a request's text."""
    if not isinstance(name, str):
        return None
    normal = vessel_name_key(name)
    return "NAME:" + normal if normal else None

def strip_accents(text: str) -> str:
    """`text` without combining accents: 'açúcar' -> 'acucar'."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def commodity_text_key(raw: str) -> str:
    """The raw commodity's normal form of C2.2: lower-cased, punctuation removed,
    whitespace collapsed.

    >>> commodity_text_key("  Soya-Beans ")
    'soyabeans'
    """
    return collapse(_PUNCTUATION.sub("", raw.lower()))


def lookup_key(text: str) -> str:
    """The form used to match a commodity against taxonomy names and aliases (C6):
    case, accents, punctuation and spacing all ignored.

    >>> lookup_key("Óleo  Diesel")
    'oleodiesel'
    """
    return re.sub(r"[\W_]+", "", strip_accents(text).lower())


def imo_is_valid(text: str) -> bool:
    """True when `text` is a seven-digit IMO number whose check digit is right.

    The check digit is the last digit of the sum of the first six digits weighted
    7, 6, 5, 4, 3, 2.

    >>> imo_is_valid("9074729")
    True
    >>> imo_is_valid("9074728")
    False
    """
    if len(text) != 7 or not text.isdigit():
        return False
    total = sum(int(d) * w for d, w in zip(text[:6], range(7, 1, -1)))
    return total % 10 == int(text[6])


def clean_imo(text: str) -> str:
    """The seven digits of an IMO number written as `9074729` or `IMO 9074729`.

    Raises ValueError when it is not a valid IMO number."""
    digits = re.sub(r"^\s*IMO[\s:]*", "", text.strip(), flags=re.IGNORECASE)
    if not imo_is_valid(digits):
        raise ValueError(f"{text!r} is not a valid IMO number (7 digits with check digit)")
    return digits
