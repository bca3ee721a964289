"""The lineup query of GET /v1/lineups: its parameters and its pipeline (C3, C4, C5).

`parse_query` turns the request's query arguments into a frozen `LineupQuery` (plus
the page size and the raw cursor), or raises `ValidationError` naming the parameter.
The pipeline is pure, DataFrame in and DataFrame out, on the rows of
`store.merge.merge`:

    merged ──apply_filters──► apply_latest (if latest) ──sort_rows──► page

`select` runs everything but the paging and gives the sorted result, which the API can
cache per query; `page` then cuts it with a keyset position, and `run` does both. A
position is a small JSON-able list `[combined_date in ns since the epoch or null, id]`,
the sort key of the last row served; the API signs it into the opaque cursor (C4).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields

import numpy as np
import pandas as pd

from store.errors import ValidationError
from store.fields import DATE_FIELDS
from store.merge import MODES

#: The query parameters of seed 4.1, in the seed's order; any other is refused (C5).
PARAMETERS: tuple[str, ...] = (
    "source",
    "port",
    "country",
    "port_name",
    "from",
    "to",
    "latest",
    "commodity",
    "merge",
    "limit",
    "cursor",
    "format",
)
FORMATS = ("json", "csv")
DEFAULT_LIMIT, MAX_LIMIT = 100, 500

_LOCODE = re.compile(r"[A-Za-z]{2}[A-Za-z0-9]{3}")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_LIMIT = re.compile(r"\d{1,6}")
_NAT = np.iinfo(np.int64).min
_LAST = np.iinfo(np.int64).max  # where rows without a date sort (C3)
_DAY_NS = 86_400 * 10**9

Position = list  # [combined_date ns or None, id]


@dataclass(frozen=True)
class LineupQuery:
    """Every filter and option of a /v1/lineups query but the page size and cursor.

    `source` is a feed UUID (lower case) or None for all feeds; `port` an upper-case
    UN/LOCODE; `commodity` canonical taxonomy names, sorted (C6)."""

    source: str | None = None
    port: str | None = None
    country: str | None = None
    port_name: str | None = None
    date_from: dt.date | None = None
    date_to: dt.date | None = None
    latest: bool = False
    commodity: tuple[str, ...] = ()
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
        return data

    def key(self) -> str:
        """`canonical()` as compact JSON with sorted keys: a stable cache/cursor key."""
        return _query_key(self)

    def rows_key(self) -> "LineupQuery":
        """This query in JSON format: JSON and CSV pages of a query share their rows
        (C9), so caches of rows key on this."""
        return _rows_key(self)

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
            "merge": None if self.merge == "all" else self.merge,
            "format": None if self.format == "json" else self.format,
        }
        return {name: value for name, value in params.items() if value is not None}


# Memoized: equal queries (frozen, hashable) arrive with many requests.
@functools.lru_cache(maxsize=4096)
def _query_key(query: LineupQuery) -> str:
    return json.dumps(query.canonical(), sort_keys=True, separators=(",", ":"))


@functools.lru_cache(maxsize=4096)
def _rows_key(query: LineupQuery) -> LineupQuery:
    return dataclasses.replace(query, format="json")


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
        country=_text(values.get("country")),
        port_name=_text(values.get("port_name")),
        date_from=date_from,
        date_to=date_to,
        latest=_boolean(values, "latest"),
        commodity=_commodities(values.get("commodity"), commodity_parser),
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
    if value is None or value == "all":
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


def _text(value: str | None) -> str | None:
    return None if value is None else value.strip()


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
    value = values.get(name, default)
    if value not in choices:
        raise ValidationError.parameter(name, f"must be one of: {', '.join(choices)}")
    return value


def _commodities(value: str | None, parser: Callable[[str], Sequence[str]]) -> tuple[str, ...]:
    if value is None:
        return ()
    return tuple(sorted(set(parser(value)), key=str.casefold))


def _limit(value: str | None) -> int:
    if value is None:
        return DEFAULT_LIMIT
    if not _LIMIT.fullmatch(value) or not 1 <= int(value) <= MAX_LIMIT:
        raise ValidationError.parameter("limit", f"must be an integer from 1 to {MAX_LIMIT}")
    return int(value)


# The pipeline (C3) -------------------------------------------------------------------


def merge_input(records: pd.DataFrame, query: LineupQuery) -> pd.DataFrame:
    """The records to merge for `query` (C2.1): those of its `source` feed when it
    names one, else all `records` (which the caller has limited to entitled feeds)."""
    if query.source is None:
        return records
    return records[records["source_id"].str.lower() == query.source]


def select(merged: pd.DataFrame, query: LineupQuery) -> pd.DataFrame:
    """The whole result of `query` over merged rows, in C3 order, with a fresh
    RangeIndex: filters, then `latest`, then the sort. Cacheable per `query.key()`."""
    rows = apply_filters(merged, query)
    if query.latest:
        rows = apply_latest(rows)
    return sort_rows(rows)


def run(merged: pd.DataFrame, query: LineupQuery, after: Position | None = None, limit: int = DEFAULT_LIMIT):
    """One page of `query`'s result after position `after`: `page(select(...))`."""
    return page(select(merged, query), after, limit)


def apply_filters(merged: pd.DataFrame, query: LineupQuery) -> pd.DataFrame:
    """The merged rows that pass the row filters of C3: `port` (case-insensitive,
    exact), `country` (case-insensitive, exact, on country_name), `port_name`
    (case-insensitive substring), `commodity` (any name equal, ignoring case, to the
    row's leaf, subgroup or group, C6) and `from`/`to` (the row's schedule span
    overlaps the days from `from` 00:00 to `to` 24:00 UTC; dateless rows never match)."""
    keep = np.ones(len(merged), dtype=bool)
    if query.port:
        keep &= _matching(merged["port_unlocode"], lambda v: _fold(v) == _fold(query.port))
    if query.country:
        keep &= _matching(merged["country_name"], lambda v: _fold(v) == _fold(query.country))
    if query.port_name:
        keep &= _matching(merged["port_name"], lambda v: _fold(query.port_name) in _fold(v))
    if query.commodity:
        wanted = {_fold(name) for name in query.commodity}
        hit = np.zeros(len(merged), dtype=bool)
        for field in ("commodity_normalized", "commodity_normalized_subgroup", "commodity_normalized_group"):
            hit |= _matching(merged[field], lambda v: _fold(v) in wanted)
        keep &= hit
    if query.date_from or query.date_to:
        keep &= _overlaps(merged, query.date_from, query.date_to)
    return merged if keep.all() else merged[keep]  # no copy when nothing is filtered out


def apply_latest(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (vessel_key, port_unlocode), the row with the latest combined_date (rows
    without one lose to any with one); ties: the latest updated_at, then the lowest id
    (C3). Row order is kept."""
    if rows.empty:
        return rows
    vessel = pd.factorize(rows["vessel_key"], use_na_sentinel=False)[0]
    port = pd.factorize(rows["port_unlocode"], use_na_sentinel=False)[0]
    pair = vessel.astype(np.int64) * (int(port.max()) + 1) + port
    date, updated = _nanos(rows["combined_date"]), _nanos(rows["updated_at"])
    order = np.lexsort((updated, date, pair))
    p, d, u = pair[order], date[order], updated[order]
    ends = np.flatnonzero(np.append(p[1:] != p[:-1], True))  # each pair's winner
    ties_next = np.append((p[1:] == p[:-1]) & (d[1:] == d[:-1]) & (u[1:] == u[:-1]), False)
    best = order[ends]
    ids = rows["id"].to_numpy(dtype=object)
    for k in np.flatnonzero(ties_next[np.maximum(ends - 1, 0)] & (ends > 0)):
        first = ends[k]
        while first > 0 and ties_next[first - 1]:
            first -= 1
        best[k] = min(order[first : ends[k] + 1], key=lambda r: ids[r])
    keep = np.zeros(len(rows), dtype=bool)
    keep[best] = True
    return rows[keep]


def sort_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """`rows` in the order of C3: combined_date ascending, rows without a date last,
    then id ascending; with a fresh RangeIndex."""
    dates = _sort_dates(rows)
    order = np.argsort(dates, kind="stable")
    ordered = dates[order]
    tied = np.zeros(len(rows), dtype=bool)
    same = ordered[1:] == ordered[:-1]
    tied[1:] |= same
    tied[:-1] |= same
    if tied.any():
        # Only rows that share a date need their ids compared (strings are slow).
        block = order[tied]
        ids = rows["id"].to_numpy(dtype=object)[block].astype(str)
        order[tied] = block[np.lexsort((ids, ordered[tied]))]
    return rows.iloc[order].reset_index(drop=True)


@dataclass(frozen=True)
class SortKeys:
    """The C3 sort key of every row of a sorted result, for keyset paging: `dates` in
    ns since the epoch (rows without a date as the largest int64, so they sort last)
    and `ids`. Computed once per result (`sort_keys`), not once per page."""

    dates: np.ndarray
    ids: np.ndarray

    def position(self, row: int) -> Position:
        """The keyset position of the row at `row`: [combined_date ns or None, id]."""
        date = int(self.dates[row])
        return [None if date == _LAST else date, str(self.ids[row])]


def sort_keys(rows: pd.DataFrame) -> SortKeys:
    """The sort keys of sorted `rows` (from `sort_rows`/`select`)."""
    return SortKeys(_sort_dates(rows), rows["id"].to_numpy(dtype=object))


def page(rows: pd.DataFrame, after: Position | None = None, limit: int = DEFAULT_LIMIT, keys: SortKeys | None = None):
    """The first `limit` rows of sorted `rows` (from `sort_rows`/`select`) that come
    after position `after` (None: from the start), and the position of the page's last
    row, or None when nothing follows it (C4). Keyset: found by binary search on the
    sort key, so rows added or removed since the last page never repeat or skip others.
    `keys` are the rows' `sort_keys`, when the caller keeps them. Raises
    ValidationError (parameter "cursor") for a malformed position."""
    if keys is None and after is None:
        chunk = rows.iloc[:limit]
        return chunk, (position_of(chunk.iloc[-1]) if limit < len(rows) else None)
    start, stop, position = page_range(keys or sort_keys(rows), after, limit)
    return rows.iloc[start:stop], position


def page_range(keys: SortKeys, after: Position | None, limit: int) -> tuple[int, int, Position | None]:
    """`page` by row numbers: `(start, stop, position)` of the page of `limit` rows
    after `after` in the result whose sort keys are `keys`, and the position of its
    last row (None when nothing follows). Raises ValidationError as `page` does."""
    start = 0 if after is None else _start_after(keys, after)
    stop = min(start + limit, len(keys.dates))
    if stop >= len(keys.dates) or stop == start:
        return start, stop, None
    return start, stop, keys.position(stop - 1)


def position_of(row: pd.Series) -> Position:
    """The keyset position of one merged row: [combined_date ns or None, id]."""
    date = row["combined_date"]
    return [None if pd.isna(date) else int(pd.Timestamp(date).value), str(row["id"])]


def _start_after(keys: SortKeys, after: Position) -> int:
    if not (
        isinstance(after, (list, tuple))
        and len(after) == 2
        and (after[0] is None or (isinstance(after[0], int) and not isinstance(after[0], bool)))
        and isinstance(after[1], str)
    ):
        raise ValidationError.parameter("cursor", "is malformed")
    date = _LAST if after[0] is None else after[0]
    low, high = np.searchsorted(keys.dates, date, "left"), np.searchsorted(keys.dates, date, "right")
    return int(low + np.searchsorted(keys.ids[low:high], after[1], "right"))


def _sort_dates(rows: pd.DataFrame) -> np.ndarray:
    dates = _nanos(rows["combined_date"]).copy()
    dates[dates == _NAT] = _LAST
    return dates


def _nanos(series: pd.Series) -> np.ndarray:
    values = pd.to_datetime(series, utc=True).array
    return values.as_unit("ns").asi8


def _overlaps(rows: pd.DataFrame, first: dt.date | None, last: dt.date | None) -> np.ndarray:
    """Whether each row's span [earliest, latest of eta/etb/etd] meets the days."""
    start = _nanos(rows["combined_date"])
    if "_span_end" in rows:
        end = _nanos(rows["_span_end"])
    else:
        end = np.max([_nanos(rows[f]) for f in DATE_FIELDS], axis=0, initial=_NAT)
    keep = start != _NAT
    if first is not None:
        keep &= end >= _day_ns(first)
    if last is not None:
        keep &= start < _day_ns(last) + _DAY_NS
    return keep


def _day_ns(day: dt.date) -> int:
    """00:00 UTC of `day` in ns since the epoch. Days outside what ns can hold
    (before 1677-09-22, after 2262-04-11) are valid `from`/`to` values (C3) that lie
    before or after every stored time, so they saturate instead of overflowing."""
    try:
        return int(pd.Timestamp(day.isoformat(), tz="UTC").value)
    except (OverflowError, pd.errors.OutOfBoundsDatetime):
        return _NAT + 1 if day.year < 1970 else _LAST - _DAY_NS


def _fold(text: str) -> str:
    return " ".join(str(text).split()).casefold()


def _matching(column: pd.Series, test: Callable[[str], bool]) -> np.ndarray:
    """`test` of each non-null value, run once per distinct value (null: False)."""
    codes, uniques = pd.factorize(column)
    hits = np.array([bool(test(u)) for u in uniques] + [False], dtype=bool)
    return hits[codes]
