"""The lineup query of GET /v1/lineups: its parameters (C3, C4, C5).

`parse_query` turns the request's query arguments into a frozen `LineupQuery` (plus
the page size and the raw cursor), or raises `ValidationError` naming the parameter.
The pipeline that answers a query (merge → filters → latest → sort → page) runs in
SQL over the merged views kept in the store (`store.views`). A position is a small
JSON-able list `[combined_date in ns since the epoch or null, id]`, the sort key of
the last row served; the API signs it into the opaque cursor (C4).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields


from store.errors import ValidationError
from store.fields import VESSEL_STATUSES
from store.merging.merge import MODES

#: The query parameters of seed 4.1, in the seed's order, and `status` (issue 45 item
#: 4: the vessel statuses to keep); any other is refused (C5).
PARAMETERS: tuple[str, ...] = (
    "source",
    "port",
    "country",
    "port_name",
    "from",
    "to",
    "latest",
    "commodity",
    "status",
    "merge",
    "limit",
    "cursor",
    "format",
)
FORMATS = ("json", "csv")
DEFAULT_LIMIT, MAX_LIMIT = 100, 500
#: The longest value of a text filter (`country`, `port_name`) and of `commodity` (a
#: list of names), in characters: beyond, 400 (issue 49 item 9; SQLite refused a
#: `port_name` of 50,001 with "LIKE or GLOB pattern too complex", a 500).
MAX_TEXT_CHARS = 200
MAX_COMMODITY_CHARS = 1_000

_LOCODE = re.compile(r"[A-Za-z]{2}[A-Za-z0-9]{3}")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
#: Control characters, never in a text filter (PostgreSQL refuses NUL in text: a 500).
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_LIMIT = re.compile(r"[0-9]{1,6}")  # ASCII digits only: `\d` takes "٥" (issue 16 item 9)

Position = list  # [combined_date ns or None, id]


@dataclass(frozen=True)
class LineupQuery:
    """Every filter and option of a /v1/lineups query but the page size and cursor.

    `source` is a feed UUID (lower case) or None for all feeds; `port` an upper-case
    UN/LOCODE; `commodity` canonical taxonomy names, sorted (C6); `status` vessel
    statuses in the seed's spelling and order (C1), none: every status."""

    source: str | None = None
    port: str | None = None
    country: str | None = None
    port_name: str | None = None
    date_from: dt.date | None = None
    date_to: dt.date | None = None
    latest: bool = False
    commodity: tuple[str, ...] = ()
    status: tuple[str, ...] = ()
    merge: str = "all"
    format: str = "json"

    def canonical(self) -> dict:
        """The query as a JSON-able dict with every key, in one spelling: what a cursor
        or a share link is bound to (C4, C8). Equal queries give equal dicts."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}  # asdict deep-copies: slow
        data["source"] = self.source or "all"
        data["date_from"] = self.date_from.isoformat() if self.date_from else None
        data["date_to"] = self.date_to.isoformat() if self.date_to else None
        data["commodity"] = list(self.commodity)
        data["status"] = list(self.status)
        return data

    def key(self) -> str:
        """`canonical()` as compact JSON with sorted keys: what a cursor is bound to."""
        return json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"))

    def to_params(self) -> dict[str, str]:
        """The query as URL parameters, defaults left out; `parse_query` reads them back
        to an equal query (share links name their filters this way, C8)."""
        params = {
            "source": self.source,
            "port": self.port,
            "country": self.country,
            "port_name": self.port_name,
            "from": self.date_from.isoformat() if self.date_from else None,
            "to": self.date_to.isoformat() if self.date_to else None,
            "latest": "true" if self.latest else None,
            "commodity": ",".join(self.commodity) or None,
            "status": ",".join(self.status) or None,
            "merge": None if self.merge == "all" else self.merge,
            "format": None if self.format == "json" else self.format,
        }
        return {name: value for name, value in params.items() if value is not None}


def file_name(query: LineupQuery, day: dt.date) -> str:
    """A CSV file name that says what `query` holds (issue 45 item 10), e.g.
    `lineups-nlrtm-soybeans-from-2026-12-04-20261204.csv` for the rows of `day`: its
    parameters' values, the feed as "feed", in letters, digits and hyphens."""
    words: list[str] = []
    for name, value in query.to_params().items():
        if name == "format":
            continue
        words += [name] if name in ("from", "to") else []
        words.append({"source": "feed", "latest": "latest", "merge": "by-feed"}.get(name, value))
    slug = re.sub(r"[^A-Za-z0-9]+", "-", "-".join(words)).strip("-").lower()[:80].strip("-")
    return f"lineups-{slug or 'all'}-{day:%Y%m%d}.csv"


def parse_query(
    args: Mapping[str, Sequence[str | bytes]],
    commodity_parser: Callable[[str], Sequence[str]],
) -> tuple[LineupQuery, int, str | None]:
    """The query, page size and raw cursor of /v1/lineups query arguments (C5).

    `args` maps each parameter to the list of its values (as a web framework gives
    them); `commodity_parser` is the taxonomy's `parse_filter`, which returns canonical
    names or raises ValidationError. Raises `ValidationError.parameter(name, reason)`
    for an unknown or repeated parameter, an empty value, or a value out of its rules.
    Whether a `source` feed exists or is entitled is the caller's check (C5)."""
    values = _single_values(args)
    date_from, date_to = _date(values, "from"), _date(values, "to")
    if date_from and date_to and date_from > date_to:
        raise ValidationError.parameter("from", "'from' must not be after 'to'")
    query = LineupQuery(
        source=_source(values.get("source")),
        port=_port(values.get("port")),
        country=_text(values, "country"),
        port_name=_text(values, "port_name"),
        date_from=date_from,
        date_to=date_to,
        latest=_boolean(values, "latest"),
        commodity=_commodities(_text(values, "commodity", MAX_COMMODITY_CHARS), commodity_parser),
        status=_statuses(_text(values, "status")),
        merge=_choice(values, "merge", MODES, "all"),
        format=_choice(values, "format", FORMATS, "json"),
    )
    return query, _limit(values.get("limit")), values.get("cursor")


def _single_values(args: Mapping[str, Sequence[str | bytes]]) -> dict[str, str]:
    values: dict[str, str] = {}
    for name in sorted(args):
        if name not in PARAMETERS:
            raise ValidationError.parameter(name, f"unknown parameter; known: {', '.join(PARAMETERS)}")
        given = list(args[name])
        if len(given) != 1:
            raise ValidationError.parameter(name, "must be given once")
        value = given[0]
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError:
                raise ValidationError.parameter(name, "is not valid UTF-8") from None
        if not value.strip():
            raise ValidationError.parameter(name, "must not be empty")
        values[name] = value
    return values


def _source(value: str | None) -> str | None:
    # Enumerations are read in any case (issue 18.9); the query keeps one spelling.
    if value is None or value.lower() == "all":
        return None
    if not _UUID.fullmatch(value):
        raise ValidationError.parameter("source", "must be 'all' or a feed UUID")
    return str(uuid.UUID(value))


def _port(value: str | None) -> str | None:
    if value is None:
        return None
    if not _LOCODE.fullmatch(value):
        raise ValidationError.parameter(
            "port", "must be a UN/LOCODE: 2 letters, then 3 letters or digits (e.g. NLRTM)"
        )
    return value.upper()


def _text(values: Mapping[str, str], name: str, longest: int = MAX_TEXT_CHARS) -> str | None:
    """A text parameter, trimmed; ValidationError when it is longer than `longest`
    characters or holds a control character."""
    value = values.get(name)
    if value is None:
        return None
    if len(value) > longest:
        raise ValidationError.parameter(name, f"must be at most {longest:,} characters")
    if _CONTROL.search(value):
        raise ValidationError.parameter(name, "must not contain control characters")
    return value.strip()


def _date(values: Mapping[str, str], name: str) -> dt.date | None:
    value = values.get(name)
    if value is None:
        return None
    try:
        if not _DATE.fullmatch(value):
            raise ValueError
        return dt.date.fromisoformat(value)
    except ValueError:
        raise ValidationError.parameter(name, "must be a date written YYYY-MM-DD") from None


def _boolean(values: Mapping[str, str], name: str) -> bool:
    value = values.get(name, "false").lower()
    if value not in ("true", "false"):
        raise ValidationError.parameter(name, "must be true or false")
    return value == "true"


def _choice(values: Mapping[str, str], name: str, choices: tuple[str, ...], default: str) -> str:
    value = values.get(name, default).lower()
    if value not in choices:
        raise ValidationError.parameter(name, f"must be one of: {', '.join(choices)}")
    return value


def _commodities(value: str | None, parser: Callable[[str], Sequence[str]]) -> tuple[str, ...]:
    if value is None:
        return ()
    return tuple(sorted(set(parser(value)), key=str.casefold))


def _statuses(value: str | None) -> tuple[str, ...]:
    """The vessel statuses of a `status` value: comma-separated, each matched ignoring
    case and surrounding spaces (C1), in the seed's order, duplicates dropped."""
    if value is None:
        return ()
    allowed = ", ".join(VESSEL_STATUSES)
    wanted = set()
    for item in value.split(","):
        status = item.strip().lower()
        if status not in VESSEL_STATUSES:
            reason = f"{item.strip()!r} is not a vessel status; allowed: {allowed}" if status else (
                f"an empty vessel status in the list; allowed: {allowed}")
            error = ValidationError.parameter("status", reason)
            error.details["allowed"] = list(VESSEL_STATUSES)
            raise error
        wanted.add(status)
    return tuple(status for status in VESSEL_STATUSES if status in wanted)


def _limit(value: str | None) -> int:
    if value is None:
        return DEFAULT_LIMIT
    if not _LIMIT.fullmatch(value) or not 1 <= int(value) <= MAX_LIMIT:
        raise ValidationError.parameter("limit", f"must be an integer from 1 to {MAX_LIMIT}")
    return int(value)
