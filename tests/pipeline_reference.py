"""The C3 pipeline in pandas, as the store ran it before the merged views (issue 15):
the literal reference that the SQL path (`store.views.sql`) is tested against.

    merged ──apply_filters──► apply_latest (if latest) ──sort_rows──► page
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from store.errors import ValidationError
from store.fields import DATE_FIELDS
from store.query import DEFAULT_LIMIT, LineupQuery, Position

_NAT = np.iinfo(np.int64).min
_LAST = np.iinfo(np.int64).max  # where rows without a date sort (C3)
_DAY_NS = 86_400 * 10**9


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
    row's leaf, subgroup or group, C6), `status` (the row's vessel status is one of
    them) and `from`/`to` (the row's schedule span
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
    if query.status:
        keep &= _matching(merged["vessel_status"], lambda v: v in query.status)
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


# The explorer's orders ----------------------------------------------------------------


def sorted_rows(frame: pd.DataFrame, column: str, ascending: bool) -> pd.DataFrame:
    """`frame` (in C3 order) ordered by `column` as the explorer's table orders a page:
    numbers and times as numbers, text case-blind, blanks last both ways, ties in C3
    order (the reference of `store.views.sql.ordered_page_statement`)."""
    values = frame[column]
    if column == "quantity":
        return _by_quantity_within_unit(frame, ascending)
    if column == "dwt":
        key = pd.to_numeric(values, errors="coerce")
    elif column in ("eta", "etb", "etd", "updated_at"):
        key = pd.to_datetime(values, utc=True, errors="coerce")
    else:
        key = values.astype(object).where(values.notna(), None).map(lambda v: None if v is None else str(v).lower())
    order = key.reset_index(drop=True).sort_values(ascending=ascending, na_position="last", kind="mergesort").index
    return frame.iloc[order]


def _by_quantity_within_unit(frame: pd.DataFrame, ascending: bool) -> pd.DataFrame:
    """Issue 45 item 5: the rows in MT, then BBL, then Units, then with a quantity but
    no unit, then without a quantity; by quantity within each (the direction's), ties
    in C3 order."""
    quantity = pd.to_numeric(frame["quantity"], errors="coerce").reset_index(drop=True)
    unit = frame["quantity_unit"].astype(object).reset_index(drop=True)
    rank = unit.map({"MT": 0, "BBL": 1, "Units": 2}).fillna(3).where(quantity.notna(), 4)
    parts = [quantity[rank == r].sort_values(ascending=ascending, kind="mergesort").index for r in range(5)]
    return frame.iloc[[i for part in parts for i in part]]


# The merge's resolution (C2.2 as amended by issue 19), record by record -----------------


def resolve_records(records: list[dict], window: dt.timedelta = dt.timedelta(days=7)) -> list[dict]:
    """Issue 19 rules 1 and 2 written out plainly for `merge=all`: copies of the
    records (dicts as the merge tests build them) with the vessel key and the commodity
    columns the merge groups them by.

    Rule 1: a name-only record (vessel key `NAME:…`) whose name is the normalised name
    of served records (commodity not blank) with exactly one IMO number, among
    `records`, takes that IMO's key.
    Rule 2: a record whose leaf is its subgroup's "(Unspecified)" leaf takes the one
    specific leaf of that subgroup found among the served records of the same
    (resolved) vessel and port whose anchors lie within `window` of its own; with none
    or several, it keeps its own."""
    from store.normalize import vessel_name_key
    from store.reference.taxonomy import default_taxonomy

    taxonomy = default_taxonomy()

    def served(r: dict) -> bool:
        return r.get("commodity") is not None and r.get("commodity_key") is not None

    def anchor(r: dict):
        return r.get("eta") or r.get("etb") or r.get("etd")

    def leaf(r: dict):
        try:
            return taxonomy.leaf(r.get("commodity_key") or "")
        except KeyError:
            return None

    imos_of_name: dict[str, set[str]] = {}
    for r in records:
        key, name = r.get("vessel_key"), r.get("vessel_name")
        if served(r) and key and key.startswith("IMO") and name and vessel_name_key(name):
            imos_of_name.setdefault("NAME:" + vessel_name_key(name), set()).add(key)
    out = []
    for r in records:
        r = dict(r)
        imos = imos_of_name.get(r.get("vessel_key") or "", set())
        if (r.get("vessel_key") or "").startswith("NAME:") and len(imos) == 1:
            r["vessel_key"] = next(iter(imos))
        out.append(r)
    result = []
    for r in out:
        mine = leaf(r)
        if served(r) and anchor(r) is not None and mine is not None and mine.name.endswith("(Unspecified)"):
            candidates = [
                s for s in out
                if served(s) and anchor(s) is not None and s.get("vessel_key") and s["vessel_key"] == r["vessel_key"]
                and s.get("port_unlocode") and s["port_unlocode"] == r["port_unlocode"]
                and leaf(s) is not None and leaf(s).subgroup == mine.subgroup and leaf(s).group == mine.group
                and not leaf(s).name.endswith("(Unspecified)") and abs(anchor(s) - anchor(r)) <= window
            ]
            if len({s["commodity_key"] for s in candidates}) == 1:
                r = dict(r)
                for column in ("commodity_key", "commodity_normalized", "commodity_normalized_subgroup",
                               "commodity_normalized_group"):
                    r[column] = candidates[0].get(column)
        result.append(r)
    return result
