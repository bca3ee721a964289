"""The lineup record's fields, enumerations, blanks and time format (contract C1).

Everything that needs to know the name, order or kind of a served field asks this
module: the store schema, ingest, the merge engine, JSON and CSV rendering.
"""

from __future__ import annotations

import datetime as dt
import re
import sys
from typing import Any

#: The served record, in the seed's table 2.1 order. Also the CSV column order (C1, C9).
RECORD_FIELDS: tuple[str, ...] = (
    "id",
    "source_id",
    "source_name",
    "port_unlocode",
    "port_name",
    "country_name",
    "berth_terminal",
    "vessel_imo",
    "vessel_name",
    "vessel_type",
    "dwt",
    "operation",
    "commodity",
    "commodity_normalized",
    "commodity_normalized_group",
    "commodity_normalized_subgroup",
    "quantity",
    "quantity_unit",
    "eta",
    "etb",
    "etd",
    "combined_date",
    "vessel_status",
    "shipper",
    "receiver",
    "charterer",
    "operator",
    "ship_agent",
    "created_at",
    "updated_at",
)

#: Columns a feed file may carry (C11); `ref` and `port_unlocode` are required, and one
#: of `vessel_imo` / `vessel_name`.
FEED_FILE_COLUMNS: tuple[str, ...] = (
    "ref",
    "port_unlocode",
    "port_name",
    "country_name",
    "berth_terminal",
    "vessel_imo",
    "vessel_name",
    "vessel_type",
    "dwt",
    "operation",
    "commodity",
    "quantity",
    "quantity_unit",
    "eta",
    "etb",
    "etd",
    "vessel_status",
    "shipper",
    "receiver",
    "charterer",
    "operator",
    "ship_agent",
    "updated_at",
)

#: The raw, per-record content fields that a stored record keeps (ingest compares these
#: to decide whether a row changed).
CONTENT_FIELDS: tuple[str, ...] = tuple(
    f for f in FEED_FILE_COLUMNS if f not in ("ref", "updated_at")
)

DATE_FIELDS: tuple[str, ...] = ("eta", "etb", "etd")
TIME_FIELDS: tuple[str, ...] = ("eta", "etb", "etd", "combined_date", "created_at", "updated_at")
INTEGER_FIELDS: tuple[str, ...] = ("dwt",)
NUMBER_FIELDS: tuple[str, ...] = ("quantity",)
COUNTERPARTY_FIELDS: tuple[str, ...] = ("shipper", "receiver", "charterer")

#: Enumerations in the seed's spelling; input is matched case-insensitively (C1).
OPERATIONS: tuple[str, ...] = ("load", "disch", "bunker", "husbandry")
VESSEL_STATUSES: tuple[str, ...] = ("expected", "anchored", "berthed", "departed")
QUANTITY_UNITS: tuple[str, ...] = ("MT", "BBL", "Units")
VESSEL_TYPES: tuple[str, ...] = (
    "Bulk Carrier",
    "Tanker",
    "Container",
    "General Cargo",
    "LNG Carrier",
    "LPG Carrier",
)
#: Closed enumerations: an unknown value refuses the file. `vessel_type` is open (C1).
ENUMERATIONS: dict[str, tuple[str, ...]] = {
    "operation": OPERATIONS,
    "vessel_status": VESSEL_STATUSES,
    "quantity_unit": QUANTITY_UNITS,
}
#: The merge modes (C2.6): every feed's records merged into one row per call, or each
#: feed's merged alone. The merge engine, the kept views and the query all take these.
MERGE_MODES: tuple[str, ...] = ("all", "by_source")

_BLANK_WORDS = frozenset({"", "n/a", "tbc", "tbn"})


def _pandas_missing(value: object) -> bool:
    """True for pandas' NaT and NA. Asked of sys.modules rather than imported: this
    module serves commands that never load pandas (issue 50), and where pandas is not
    loaded no value can be one of its missing markers."""
    pandas = sys.modules.get("pandas")
    return pandas is not None and (value is pandas.NaT or value is pandas.NA)


def is_blank(value: object) -> bool:
    """True when `value` is blank in the sense of C1: null, empty or whitespace-only,
    or (case-insensitive, trimmed) N/A, TBC, TBN."""
    if value is None:
        return True
    if isinstance(value, float) and value != value:  # NaN
        return True
    if _pandas_missing(value):
        return True
    if isinstance(value, str):
        return value.strip().lower() in _BLANK_WORDS
    return False


def text_value(value: object) -> str | None:
    """`value` as text, untrimmed, with C1 blanks (whitespace, N/A, TBC, TBN) as None:
    the text a buyer gets in JSON and CSV."""
    text = value if isinstance(value, str) else str(value)
    return None if text.strip().lower() in _BLANK_WORDS else text


def blank_to_none(value: object) -> object:
    """Return None for a blank value, the value (strings trimmed) otherwise."""
    if is_blank(value):
        return None
    if isinstance(value, str):
        return value.strip()
    return value


def canonical_enum(field: str, value: str) -> str | None:
    """The seed's spelling of an enumeration value matched case-insensitively, or None
    when `value` is not one of the field's values. `vessel_type` is open: an unknown
    type is kept as given (C1)."""
    wanted = " ".join(value.split()).lower()
    choices = VESSEL_TYPES if field == "vessel_type" else ENUMERATIONS[field]
    for choice in choices:
        if choice.lower() == wanted:
            return choice
    if field == "vessel_type":
        return " ".join(value.split())
    return None


def format_time(value: dt.datetime | None) -> str | None:
    """A UTC time as `YYYY-MM-DDTHH:MM:SSZ` (C1), of a datetime or a pandas Timestamp
    (a datetime too); None and NaT give None."""
    if value is None or _pandas_missing(value):
        return None
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def parse_time(text: str) -> dt.datetime:
    """Parse an ISO 8601 date-time or a `YYYY-MM-DD` date into an aware UTC datetime.

    A time without an offset is UTC (C1). Raises ValueError for anything else.
    """
    text = text.strip()
    if _ISO_DATE.match(text):
        parsed = dt.datetime.strptime(text, "%Y-%m-%d")
    else:
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        parsed = dt.datetime.fromisoformat(text)
        if "T" not in text and " " not in text:
            raise ValueError(f"not an ISO 8601 date-time: {text!r}")
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=dt.timezone.utc)
    return parsed.astimezone(dt.timezone.utc)


def content_json(record) -> dict[str, Any]:
    """A stored record's content as JSON, for its revision history."""
    content = {}
    for field in (*CONTENT_FIELDS, "commodity_leaf"):
        value = getattr(record, field)
        if isinstance(value, dt.datetime):
            value = format_time(value)
        content[field] = value
    return content


def utcnow() -> dt.datetime:
    """The current time, aware, in UTC, to the second."""
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0)


def stored_now() -> dt.datetime:
    """The current time as the store keeps its timestamps: naive, in UTC, to the
    second."""
    return utcnow().replace(tzinfo=None)
