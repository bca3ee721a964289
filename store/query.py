"""The lineup query of GET /v1/lineups: its parameters and their rules (C3, C4, C5).

The one place that turns query parameters into a query and back into an address:
- `parse_query`: the request's arguments → a frozen `LineupQuery` (plus the page size
  and the raw cursor), or `ValidationError` naming the parameter: the API's parser,
  and the check of the filters a share link freezes;
- `read_filters`: the same rules, each filter on its own, for an address typed or
  bookmarked by a person (the explorer's): what breaks its rule is left out and said;
- `LineupQuery.to_params`: a query → its parameters, defaults left out (share links'
  filters, the explorer's address);
- the rules' constants (`PARAMETERS`, `LOCODE_PATTERN`, `DATE_PATTERN`, the choices,
  the limits), from which the OpenAPI document describes the parameters.

The pipeline that answers a query (merge → filters → latest → sort → page) runs in
SQL over the merged views kept in the store (`store.views`). A position is a small
JSON-able list `[combined_date in ns since the epoch or null, id]`, the sort key of
the last row served; the API signs it into the opaque cursor (C4).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from functools import partial
from typing import Any

from store.errors import ValidationError
from store.fields import MERGE_MODES as MODES
from store.fields import VESSEL_STATUSES
from store.ids import canonical_uuid

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
#: The page's parameters: a share link does not freeze them (C8).
PAGE_PARAMETERS: tuple[str, ...] = ("cursor", "limit")
#: The parameters that choose rows: all but the page's and `format`.
FILTERS: tuple[str, ...] = tuple(name for name in PARAMETERS if name not in (*PAGE_PARAMETERS, "format"))
FORMATS = ("json", "csv")
BOOLEANS = ("true", "false")
#: `source`'s word for every feed of the buyer.
ALL_SOURCES = "all"
DEFAULT_LIMIT, MAX_LIMIT = 100, 500
#: The longest value of a text filter (`country`, `port_name`) and of `commodity` (a
#: list of names), in characters: beyond, 400 (issue 49 item 9; SQLite refused a
#: `port_name` of 50,001 with "LIKE or GLOB pattern too complex", a 500).
MAX_TEXT_CHARS = 200
MAX_COMMODITY_CHARS = 1_000
#: The rules' patterns, unanchored (a value must match whole).
LOCODE_PATTERN = "[A-Za-z]{2}[A-Za-z0-9]{3}"
DATE_PATTERN = r"\d{4}-\d{2}-\d{2}"

_LOCODE = re.compile(LOCODE_PATTERN)
_DATE = re.compile(DATE_PATTERN)
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
        data["source"] = self.source or ALL_SOURCES
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


CommodityParser = Callable[[str], Sequence[str]]


def parse_query(
    args: Mapping[str, Sequence[str | bytes]], commodity_parser: CommodityParser
) -> tuple[LineupQuery, int, str | None]:
    """The query, page size and raw cursor of /v1/lineups query arguments (C5).

    `args` maps each parameter to the list of its values (as a web framework gives
    them); `commodity_parser` is the taxonomy's `parse_filter`, which returns canonical
    names or raises ValidationError. Raises `ValidationError.parameter(name, reason)`
    for an unknown or repeated parameter, an empty value, or a value out of its rules.
    Whether a `source` feed exists or is entitled is the caller's check (C5)."""
    values = _single_values(args)
    query = LineupQuery(**_fields(values, commodity_parser, None))
    return query, _limit(values.get("limit")), values.get("cursor")


def read_filters(
    values: Mapping[str, str], commodity_parser: CommodityParser
) -> tuple[LineupQuery, list[ValidationError]]:
    """The query of an address's parameters (one value each), by the rules of
    `parse_query`, each filter on its own: a value that breaks its rule is left at
    its default and its ValidationError returned; `from` after `to` is kept (the
    query then says so); an empty value is no value; other parameters (`FILTERS`
    lists the filters) are passed over. Returns the query and the errors, in parameter order."""
    errors: list[ValidationError] = []
    given = {name: value for name, value in values.items() if name in FILTERS and value.strip()}
    return LineupQuery(**_fields(given, commodity_parser, errors)), errors


def _fields(
    values: Mapping[str, str], commodity_parser: CommodityParser, errors: list[ValidationError] | None
) -> dict[str, Any]:
    """The `LineupQuery` fields of the given filter values, each read by its rule in
    `_RULES` order. With `errors` None the first broken rule (or `from` after `to`)
    raises; otherwise broken rules are collected there and their fields left out."""
    out: dict[str, Any] = {}
    for name, (field, rule) in _RULES.items():
        if name in values:
            try:
                out[field] = rule(values[name], commodity_parser)
            except ValidationError as error:
                if errors is None:
                    raise
                errors.append(error)
        if name == "to" and errors is None and out.get("date_from") and out.get("date_to"):
            if out["date_from"] > out["date_to"]:
                raise ValidationError.parameter("from", "'from' must not be after 'to'")
    return out


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


def _source(value: str, _parser: CommodityParser) -> str | None:
    # Enumerations are read in any case (issue 18.9); the query keeps one spelling.
    if value.lower() == ALL_SOURCES:
        return None
    feed_id = canonical_uuid(value)
    if feed_id is None:
        raise ValidationError.parameter("source", "must be 'all' or a feed UUID")
    return feed_id


def _port(value: str, _parser: CommodityParser) -> str:
    if not _LOCODE.fullmatch(value):
        raise ValidationError.parameter(
            "port", "must be a UN/LOCODE: 2 letters, then 3 letters or digits (e.g. NLRTM)"
        )
    return value.upper()


def _text(name: str, value: str, _parser: CommodityParser, longest: int = MAX_TEXT_CHARS) -> str:
    """A text parameter, trimmed; ValidationError when it is longer than `longest`
    characters or holds a control character."""
    if len(value) > longest:
        raise ValidationError.parameter(name, f"must be at most {longest:,} characters")
    if _CONTROL.search(value):
        raise ValidationError.parameter(name, "must not contain control characters")
    return value.strip()


def _date(name: str, value: str, _parser: CommodityParser) -> dt.date:
    try:
        if not _DATE.fullmatch(value):
            raise ValueError
        return dt.date.fromisoformat(value)
    except ValueError:
        raise ValidationError.parameter(name, "must be a date written YYYY-MM-DD") from None


def _boolean(name: str, value: str, _parser: CommodityParser) -> bool:
    if value.lower() not in BOOLEANS:
        raise ValidationError.parameter(name, "must be true or false")
    return value.lower() == "true"


def _choice(name: str, choices: tuple[str, ...], value: str, _parser: CommodityParser) -> str:
    if value.lower() not in choices:
        raise ValidationError.parameter(name, f"must be one of: {', '.join(choices)}")
    return value.lower()


def _commodities(value: str, parser: CommodityParser) -> tuple[str, ...]:
    names = parser(_text("commodity", value, parser, MAX_COMMODITY_CHARS))
    return tuple(sorted(set(names), key=str.casefold))


def _statuses(value: str, parser: CommodityParser) -> tuple[str, ...]:
    """The vessel statuses of a `status` value: comma-separated, each matched ignoring
    case and surrounding spaces (C1), in the seed's order, duplicates dropped."""
    value = _text("status", value, parser)
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


#: Each filter parameter: the `LineupQuery` field it sets and its rule, in the order
#: a query's errors are reported (the dates first: `from` after `to` is checked then).
_RULES: dict[str, tuple[str, Callable[[str, CommodityParser], Any]]] = {
    "from": ("date_from", partial(_date, "from")),
    "to": ("date_to", partial(_date, "to")),
    "source": ("source", _source),
    "port": ("port", _port),
    "country": ("country", partial(_text, "country")),
    "port_name": ("port_name", partial(_text, "port_name")),
    "latest": ("latest", partial(_boolean, "latest")),
    "commodity": ("commodity", _commodities),
    "status": ("status", _statuses),
    "merge": ("merge", partial(_choice, "merge", MODES)),
    "format": ("format", partial(_choice, "format", FORMATS)),
}


def _limit(value: str | None) -> int:
    if value is None:
        return DEFAULT_LIMIT
    if not _LIMIT.fullmatch(value) or not 1 <= int(value) <= MAX_LIMIT:
        raise ValidationError.parameter("limit", f"must be an integer from 1 to {MAX_LIMIT}")
    return int(value)
