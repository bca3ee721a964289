"""A lineup query (C3) as SQL over kept rows (`merged_rows`): row filters, `latest`, the
C3 order and keyset pages (C4), on SQLite and PostgreSQL alike.

- Filters: `port` is an equality, `country` an equality on the folded name,
  `commodity` an IN list of taxonomy leaves (a group or subgroup name stands for its
  leaves: a row's three commodity names all come from its one leaf, C6), `port_name`
  a substring of the folded name, `status` an IN list of vessel statuses (of merged
  rows: the merged value, C2.5, C3), `from`/`to` an overlap of the row's schedule
  span with the days. The date filter also bounds the sort key from below by the view's
  longest span, so that it is an index range, not a scan.
- Feeds: an `all` view is the reader's feed set; the one `by_source` view holds every
  feed's rows, of which the reader's feeds are kept (`Target.sources`).
- `latest`: C3's "per (vessel, port) the latest among the filtered rows". Each view
  marks the row that is the latest of its (vessel, port) among all its rows
  (`is_top`; in the `by_source` view, among its feed's rows). With no filter but
  `port` (which keeps or drops whole (vessel, port) pairs), `latest` is exactly
  those rows: an index range. With other filters, a top row that passes them is
  kept, and any other row that passes them is kept when no row of its pair that
  passes the same filters ranks above it (a later combined_date, any date over none;
  then a later updated_at; then a lower id): a NOT EXISTS that probes an index, only
  for rows that are not top. A `by_source` reader of several feeds: the same probe
  among the pair's rows of their feeds, for every row (for top rows only, with no
  filter but `port`): one feed's latest may be beaten by another's.
- Order and pages: (sort_key, id), sort_key being combined_date in ns or the largest
  int64 (dateless rows last); a page is the rows after the cursor's position, limit
  + 1 of them (the extra one says whether another page follows).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from store.frames import pd
from sqlalchemy import (
    BigInteger, ColumnElement, Float, Select, String, and_, bindparam, case, cast, exists, false, func, literal, null, or_,
    select, tuple_, union_all,
)
from sqlalchemy.orm import aliased

from store.query import LineupQuery, Position
from store.database.schema import MergedRow
from store.fields import QUANTITY_UNITS
from store.reference.taxonomy import Taxonomy
from store.views.stored import LAST, READ_COLUMNS, fold, of_pairs

_FIRST = np.iinfo(np.int64).min
#: The columns a read takes (`READ_COLUMNS`), in that order.
_READ = tuple(getattr(MergedRow, name) for name in READ_COLUMNS)
_DAY_NS = 86_400 * 10**9


@dataclass(frozen=True)
class Target:
    """The view a query reads, the longest span of its rows, and, in the `by_source`
    view, which feeds' rows the reader sees (`sources`: None when every feed the view
    holds) and that `is_top` marks each feed's latest (`feed_tops`)."""

    view_id: int
    max_span: int
    sources: tuple[str, ...] | None = None
    feed_tops: bool = False

    @property
    def exact_tops(self) -> bool:
        """Whether `is_top` marks C3's latest of a pair among the reader's rows."""
        return not self.feed_tops or (self.sources is not None and len(self.sources) == 1)


def within(table, target: Target) -> list[ColumnElement]:
    """The rows of `table` (MergedRow or an alias) that the reader of `target` sees
    (parameters `view_id` and `sources`: `target_values`)."""
    clauses = [table.view_id == bindparam("view_id", target.view_id)]
    if target.sources is not None:
        clauses.append(table.source_id.in_(bindparam("sources", list(target.sources), expanding=True)))
    return clauses


def target_values(target: Target) -> dict[str, object]:
    """The values of `within`'s parameters."""
    values: dict[str, object] = {"view_id": target.view_id}
    if target.sources is not None:
        values["sources"] = list(target.sources)
    return values


def _day_ns(day: dt.date) -> int:
    """00:00 UTC of `day` in ns; days beyond what ns can hold saturate (C3 allows them)."""
    try:
        return int(pd.Timestamp(day.isoformat(), tz="UTC").value)
    except (OverflowError, pd.errors.OutOfBoundsDatetime):
        return _FIRST + 1 if day.year < 1970 else LAST - _DAY_NS


def leaves_of(taxonomy: Taxonomy, names: Sequence[str]) -> tuple[str, ...]:
    """The leaf names a `commodity` filter matches: leaves whose own, subgroup or
    group name equals one of `names`, ignoring case (C6)."""
    return _leaves_of(taxonomy, tuple(names))


@functools.lru_cache(maxsize=512)
def _leaves_of(taxonomy: Taxonomy, names: tuple[str, ...]) -> tuple[str, ...]:
    # Cached: folding every leaf's three names took 0.8 ms, and a page asks up to three
    # times. Bounded: 512 entries of at most the taxonomy's leaf names (strings it
    # holds anyway), well under 1 MiB; a taxonomy is compared by identity.
    wanted = {fold(name) for name in names}
    return tuple(sorted(
        leaf.name for leaf in taxonomy.leaves
        if fold(leaf.name) in wanted or fold(leaf.subgroup) in wanted or fold(leaf.group) in wanted
    ))


def filter_values(query: LineupQuery, taxonomy: Taxonomy, max_span: int) -> dict[str, object]:
    """The values of `query`'s row filters (C3), by the name of their parameter in
    `filters`: only the filters it uses. None for a name that matches nothing: no
    stored name holds a NUL character (nor can PostgreSQL take one as a parameter)."""
    values: dict[str, object] = {}
    if query.port:
        values["port"] = query.port.upper()
    if query.country:
        wanted = fold(query.country)
        values["country"] = None if "\x00" in wanted else wanted
    if query.port_name:
        wanted = fold(query.port_name)
        # A substring: LIKE with its wildcards and the escape escaped, as SQLAlchemy's
        # `contains(..., autoescape=True)` does (which takes a literal, not a parameter).
        escaped = wanted.replace("/", "//").replace("%", "/%").replace("_", "/_")
        values["port_name"] = None if "\x00" in wanted else f"%{escaped}%"
    if query.commodity:
        values["leaves"] = list(leaves_of(taxonomy, query.commodity) or [""])
    if query.status:
        values["statuses"] = list(query.status)
    if query.date_from:
        start = _day_ns(query.date_from)
        values["span_from"] = start
        values["sort_from"] = max(start - max_span, _FIRST)
    if query.date_to:
        values["sort_to"] = _day_ns(query.date_to) + _DAY_NS
    return values


def filters(
    table, query: LineupQuery, taxonomy: Taxonomy, max_span: int, indexed: bool = True, by_commodity: bool = False,
) -> list[ColumnElement]:
    """The row filters of `query` (C3) on `table` (MergedRow or an alias of it), each
    value a parameter named as in `filter_values`. `indexed=False` writes each term
    so that no index can serve it (`x + 0`, `x || ''`: the same values), for probes
    that must go by another index; `by_commodity` so writes every term but the
    commodity filter's and the port's (a port and a commodity have their own index,
    migration 0011)."""
    plain = lambda c: c  # noqa: E731
    hidden = lambda c: c.concat("") if isinstance(c.type, String) else c + 0  # noqa: E731
    col = plain if indexed and not by_commodity else hidden
    # The terms that `by_commodity` leaves to their indexes: the commodity's, and the
    # port's ((view, port, commodity) is one).
    own = plain if indexed else hidden
    values = filter_values(query, taxonomy, max_span)
    value = lambda name: bindparam(name, values[name])  # noqa: E731
    clauses: list[ColumnElement] = []
    if "port" in values:
        clauses.append(own(table.port_unlocode) == value("port"))
    if "country" in values:
        clauses.append(false() if values["country"] is None else col(table.country_key) == value("country"))
    if "port_name" in values:
        clauses.append(false() if values["port_name"] is None else col(table.port_name_key).like(value("port_name"), escape="/"))
    if "leaves" in values:
        clauses.append(own(table.commodity_normalized).in_(bindparam("leaves", values["leaves"], expanding=True)))
    if "statuses" in values:
        clauses.append(col(table.vessel_status).in_(bindparam("statuses", values["statuses"], expanding=True)))
    if "span_from" in values or "sort_to" in values:
        clauses.append(table.combined_date.is_not(None))
    if "span_from" in values:
        clauses += [col(table.span_end) >= value("span_from"), col(table.sort_key) >= value("sort_from")]
    if "sort_to" in values:
        clauses.append(col(table.sort_key) < value("sort_to"))
    return clauses


def _rank(table) -> ColumnElement:
    return func.coalesce(table.combined_date, literal(int(_FIRST)))


#: The other rows of a pair in `latest`'s probe: one alias for every statement (an
#: alias is immutable, and making one per request cost more than the probe's SQL).
_OTHER = aliased(MergedRow, name="other")


def _not_beaten(row, query: LineupQuery, taxonomy: Taxonomy, target: Target) -> ColumnElement:
    """C3's `latest` for the row `row`: no row of its (vessel, port) among the
    filtered rows of the view ranks above it. The probe reads the pair by its index:
    its filters are written so that no index serves them (planners otherwise walk a
    date or port range for every row); `port` is left out, the pair has the row's."""
    other = _OTHER
    above = or_(
        _rank(other) > _rank(row),
        and_(
            _rank(other) == _rank(row),
            or_(other.updated_at > row.updated_at, and_(other.updated_at == row.updated_at, other.id < row.id)),
        ),
    )
    probe = (
        select(literal(1))
        .select_from(other)
        .where(
            *within(other, target),
            other.vessel_key == row.vessel_key,
            other.port_unlocode == row.port_unlocode,
            *filters(other, dataclasses.replace(query, port=None), taxonomy, target.max_span, indexed=False),
            above,
        )
    )
    return ~exists(probe)


def _pair_filters_only(query: LineupQuery) -> bool:
    """Whether every filter of `query` keeps or drops whole (vessel, port) pairs."""
    return not (query.country or query.port_name or query.commodity or query.status or query.date_from or query.date_to)


def _where(query: LineupQuery, taxonomy: Taxonomy, target: Target, by_commodity: bool = False) -> list[ColumnElement]:
    row = MergedRow
    clauses = within(row, target)
    clauses += filters(row, query, taxonomy, target.max_span, by_commodity=by_commodity)
    if query.latest:
        pairs_only = _pair_filters_only(query)
        if target.exact_tops:
            top = row.is_top == 1
            clauses.append(top if pairs_only else or_(top, _not_beaten(row, query, taxonomy, target)))
        elif pairs_only:  # the latest of the reader's rows is one feed's latest
            clauses += [row.is_top == 1, _not_beaten(row, query, taxonomy, target)]
        else:
            clauses.append(_not_beaten(row, query, taxonomy, target))
    return clauses


def pair_statements(
    query: LineupQuery, taxonomy: Taxonomy, target: Target, pairs: Sequence[tuple[str, str]], dialect: str
) -> tuple[Select, Select]:
    """Two statements over the reader's rows of the (vessel key, port) `pairs` in the
    view (a change feed's page, issue 46): every row's (vessel key, port, id), and the
    rows (`READ_COLUMNS`) of `query`'s result, filters and `latest` (C3) included:
    `latest` ranks a row among its pair's rows only, so a pair's part of the result is
    its own."""
    of_these = of_pairs(MergedRow.vessel_key, MergedRow.port_unlocode, pairs, dialect)
    present = select(MergedRow.vessel_key, MergedRow.port_unlocode, MergedRow.id).where(*within(MergedRow, target), of_these)
    result = select(*_READ).where(*_where(query, taxonomy, target), of_these).order_by(MergedRow.sort_key, MergedRow.id)
    return present, result


def _after_values(after: Position | None) -> dict[str, object]:
    if after is None:
        return {}
    date, row_id = after
    return {"after_key": LAST if date is None else int(date), "after_id": row_id}


def page_statement(
    query: LineupQuery, taxonomy: Taxonomy, target: Target, after: Position | None, limit: int | None,
    sparse: bool = False,
) -> tuple[Select, dict[str, object]]:
    """The rows (`READ_COLUMNS`, then sort_key) after `after`, in C3 order, at most
    `limit` (None: all), as a statement and the values of its parameters. `sparse`:
    the query's commodity filter keeps few rows (`is_sparse`), so the page is read by
    the commodity index (with a port, the (view, port, commodity) one) and sorted,
    instead of walking a longer index in C3 order.

    The statement is the one of the page's shape (which filters, `latest`, the kind of
    view, `sparse`, a position, a limit), built once per process (`_PAGES`) and run
    with each page's values: building a SELECT and its cache key cost ~0.5 ms of
    Python a page, ~7% of a page at 1,000,000 records, all of it holding the GIL."""
    values = {**target_values(target), **filter_values(query, taxonomy, target.max_span), **_after_values(after)}
    if limit is not None:
        values["limit"] = limit
    shape = (tuple((name, value is None) for name, value in values.items()), query.latest, target.exact_tops,
             target.feed_tops, sparse)
    statement = _PAGES.get(shape)
    if statement is None:
        statement = _page_statement(query, taxonomy, target, after, limit, sparse)
        if len(_PAGES) >= _MAX_PAGES:
            _PAGES.clear()
        _PAGES[shape] = statement
    return statement, {name: value for name, value in values.items() if value is not None}


#: Page statements by shape (`page_statement`). Bounded by the shapes a query can
#: take (a few hundred at most), not by buyers, questions or rows.
_PAGES: dict[tuple, Select] = {}
_MAX_PAGES = 512


def _page_statement(
    query: LineupQuery, taxonomy: Taxonomy, target: Target, after: Position | None, limit: int | None, sparse: bool,
) -> Select:
    """`page_statement`'s statement, built with this page's values: every value that
    differs between pages of one shape is a named parameter (`target_values`,
    `filter_values`, `after_key`, `after_id`, `limit`)."""
    columns = [*_READ, MergedRow.sort_key]
    # `sort_key + 0` is the same order, but no index serves it; with the other
    # filters written likewise (`by_commodity`), the commodity's index is the one to read.
    first = MergedRow.sort_key + 0 if sparse else MergedRow.sort_key
    clauses = _where(query, taxonomy, target, by_commodity=sparse)
    if after is not None:
        position = _after_values(after)
        key, row_id = bindparam("after_key", position["after_key"]), bindparam("after_id", position["after_id"])
        clauses.append(tuple_(MergedRow.sort_key, MergedRow.id) > tuple_(key, row_id))
    statement = select(*columns).where(*clauses).order_by(first, MergedRow.id)
    return statement.limit(bindparam("limit", limit)) if limit is not None else statement


#: A commodity filter that keeps fewer rows of a view than this is `is_sparse`.
SPARSE_ROWS = 2_000


def is_sparse(session, query: LineupQuery, taxonomy: Taxonomy, target: Target) -> bool:
    """Whether `query`'s commodity filter (at its port, when it names one) keeps fewer
    than `SPARSE_ROWS` rows of the view, counted by its index (at most that many
    entries read; with a port, the (view, port, commodity) index: counted over the
    whole view, a reader of three feeds of the `by_source` view read the commodity's
    rows of every feed, 35 ms at 1,000,000 records, for a page at one port). Why: a
    planner cannot know how rare one commodity or group is (SQLite keeps only average
    rows per key), and to give the C3 order without a sort it walks the whole view, or a
    port's or country's rows, testing each for the commodity: 100 ms at 250,000
    records for a page of none. A sparse filter is better read by its own index."""
    if not query.commodity:
        return False
    wanted = filter_values(query, taxonomy, target.max_span)
    values = {**target_values(target), **{name: wanted[name] for name in ("port", "leaves") if name in wanted}}
    return session.connection().scalar(_sparse_count("port" in values, target.sources is not None), values) < SPARSE_ROWS


@functools.lru_cache(maxsize=4)
def _sparse_count(at_port: bool, of_sources: bool) -> Select:
    """`is_sparse`'s count, built once per kind and run with each question's values
    (its parameters are those of `within` and `filters`)."""
    kept = (
        select(literal(1))
        .where(
            *within(MergedRow, Target(0, 0, () if of_sources else None)),
            *([MergedRow.port_unlocode == bindparam("port")] if at_port else []),
            MergedRow.commodity_normalized.in_(bindparam("leaves", expanding=True)),
        )
        .limit(SPARSE_ROWS)
    )
    return select(func.count()).select_from(kept.subquery())


def count_statement(query: LineupQuery, taxonomy: Taxonomy, target: Target) -> Select:
    """How many rows the whole result of `query` has. With `latest` and filters that
    cut into (vessel, port) pairs, that is how many pairs the filtered rows touch (C3
    keeps exactly one row of each): counted without probing every row for a better
    one of its pair (2.7 s instead of the probe's, at 1M records)."""
    if _from_only(query) and target.sources is None and (target.exact_tops or not query.latest):
        return _from_count(query, target)
    if query.latest and (not _pair_filters_only(query) or not target.exact_tops):
        # One text per pair (a LOCODE has five letters): an expression, so that no
        # planner walks the (vessel, port) index for distinctness and reads every row
        # of the view through it, instead of the filters' own range.
        pair = MergedRow.port_unlocode + MergedRow.vessel_key
        filtered = [*within(MergedRow, target), *filters(MergedRow, query, taxonomy, target.max_span)]
        return select(func.count(pair.distinct())).where(*filtered)
    return select(func.count()).select_from(MergedRow).where(*_where(query, taxonomy, target))


def _from_only(query: LineupQuery) -> bool:
    """Whether `from` is the query's only filter, but for a `status` without `latest`
    (the explorer's first view: upcoming calls, not departed)."""
    others = (query.port, query.country, query.port_name, query.commodity, query.date_to)
    return query.date_from is not None and not any(others) and not (query.status and query.latest)


def _from_count(query: LineupQuery, target: Target) -> Select:
    """The count of a query whose only filter is `from` (the explorer's first view,
    "upcoming calls", with or without `latest`), read from narrow index ranges
    instead of every row it keeps. A row's combined_date is the earliest of its
    dates and span_end the latest, so a row dated on or after `from` overlaps it
    (C3), and a row dated before `from` overlaps it only if it starts within
    `max_span` before `from` and reaches past it: a short range of the view, read
    row by row. Without `latest`, the rows dated on or after `from` are counted in
    the `is_top` index (both values; it holds the sort key), which is a small
    fraction of the table's pages: 0.8 s → 0.05 s for 510,000 rows of a 1M-record
    store read cold. With `latest`, pairs are counted (C3 keeps one row of each):

    - a pair whose top row (`is_top`: the latest combined_date) is dated on or after
      `from` counts: the top rows of that range of the same index;
    - a pair whose top row starts before `from` counts only if one of its rows reaches
      past `from`, and every row of the pair starts no later than the top row: such a
      row is in the short range above, probed for a dated row of its pair on or after
      `from` (then its top row is one, counted already): a range of the (view, vessel,
      port) index, which on SQLite holds the sort key (0.9 s as a distinct count of
      the pairs of 510,000 rows, 0.13 s this way)."""
    row, other = MergedRow, _OTHER
    start = _day_ns(query.date_from)
    dated_after = (row.view_id == target.view_id, row.sort_key >= start, row.sort_key < LAST)
    crossing = (
        row.view_id == target.view_id, row.sort_key >= max(start - target.max_span, _FIRST), row.sort_key < start,
        row.span_end >= start,
    )
    if not query.latest:
        if query.status:
            # The statuses' ranges of their own index (view, status, sort key).
            statuses = row.vessel_status.in_(list(query.status))
            after = select(func.count()).where(*dated_after, statuses)
            crossing = (*crossing, statuses)
        else:
            after = select(func.count()).where(*dated_after, row.is_top.in_((0, 1)))
        return select(after.scalar_subquery() + select(func.count()).where(*crossing).scalar_subquery())
    tops = select(func.count()).where(*dated_after, row.is_top == 1)
    counted = (
        select(literal(1))
        .select_from(other)
        .where(
            other.view_id == target.view_id, other.vessel_key == row.vessel_key,
            other.port_unlocode == row.port_unlocode, other.sort_key >= start, other.sort_key < LAST,
        )
    )
    pairs = select(func.count((row.port_unlocode + row.vessel_key).distinct())).where(*crossing, ~exists(counted))
    return select(tops.scalar_subquery() + pairs.scalar_subquery())


def position(sort_key: int, row_id: str) -> Position:
    """The C4 keyset position of a row: [combined_date ns or None, id]."""
    return [None if sort_key == LAST else int(sort_key), str(row_id)]


# ---------------------------------------------------------------- the explorer's reads
#: Columns a page can be ordered by besides the C3 order; text is compared case-blind.
ORDERABLE = (
    "vessel_name", "vessel_imo", "port_name", "country_name", "commodity_normalized", "operation", "quantity",
    "quantity_unit", "eta", "etb", "etd", "vessel_status", "source_name", "updated_at",
)
_NUMERIC = frozenset({"quantity", "eta", "etb", "etd", "updated_at"})


def ordered_page_statement(
    query: LineupQuery, taxonomy: Taxonomy, target: Target, offset: int, limit: int,
    column: str | None = None, ascending: bool = True, postgresql: bool = False,
) -> Select:
    """`limit` rows of the whole result from row `offset` on: in C3 order, or ordered
    by `column` (of ORDERABLE), blanks last both ways, ties in C3 order. Text is
    compared lower-cased, byte by byte on both back ends (PostgreSQL's "C"
    collation, SQLite's default), so both give one order."""
    columns = list(_READ)
    order: list = []
    if column is not None:
        if column not in ORDERABLE:
            raise ValueError(f"cannot order by {column!r}")
        if column == "quantity":
            order.append(unit_rank(MergedRow))
        key = getattr(MergedRow, column)
        if column not in _NUMERIC:
            key = func.lower(key)
            if postgresql:
                key = key.collate("C")
        order.append((key.asc() if ascending else key.desc()).nulls_last())
    order += [MergedRow.sort_key, MergedRow.id]
    return select(*columns).where(*_where(query, taxonomy, target)).order_by(*order).offset(offset).limit(limit)


def unit_rank(table) -> ColumnElement:
    """Where a row goes when a page is ordered by quantity: quantities are compared
    only within one unit (a barrel is no tonne, issue 45 item 5), so the rows of each
    unit come together, in `QUANTITY_UNITS` order (tonnes first, as the charts count
    them) whichever the direction, then quantities without a unit, then rows without
    a quantity."""
    ranks = [(table.quantity_unit == unit, rank) for rank, unit in enumerate(QUANTITY_UNITS)]
    return case((table.quantity.is_(None), len(QUANTITY_UNITS) + 1), *ranks, else_=len(QUANTITY_UNITS))


def near_statement(
    query: LineupQuery, taxonomy: Taxonomy, target: Target, ports: Sequence[str], spans: Sequence[tuple[int, int]]
) -> Select:
    """The result's rows at `ports` whose combined date (ns) lies in one of `spans`
    (first, last), in C3 order: the rows that could be a near-duplicate of a page's."""
    columns = list(_READ)
    if not ports or not spans:
        return select(*columns).where(false())
    within = or_(*(MergedRow.sort_key.between(first, last) for first, last in spans))
    return (
        select(*columns)
        .where(*_where(query, taxonomy, target), MergedRow.port_unlocode.in_(sorted(set(ports))), within)
        .order_by(MergedRow.sort_key, MergedRow.id)
    )


def summary_statement(query: LineupQuery, taxonomy: Taxonomy, target: Target) -> Select:
    """The charts' totals of the whole result in one pass over it: the result's rows
    are chosen once (a materialised CTE: with `latest`, the probe runs once per row,
    not once per total), then totalled three ways. Rows of (part, day, a, b, c, value):

    - ("tonnes", day since the epoch, commodity group, -, -, tonnes): the quantities
      in `MT` of dated rows, summed per day and group;
    - ("units", -, unit, -, -, rows): rows with a quantity in another unit, or none;
    - ("vessels", -, port LOCODE, port name, vessel status, distinct vessels): a row
      without a vessel key counts no vessel."""
    row = MergedRow
    chosen = (
        select(
            row.combined_date, row.commodity_normalized_group, row.quantity, row.quantity_unit,
            row.port_unlocode, row.port_name, row.vessel_status, row.vessel_key,
        )
        .where(*_where(query, taxonomy, target))
        .cte("chosen")
        .prefix_with("MATERIALIZED")
    )
    c = chosen.c
    no_text, no_day = cast(null(), String), cast(null(), BigInteger)
    day = c.combined_date // _DAY_NS
    tonnes = (
        select(
            literal("tonnes", String).label("part"), day.label("day"), c.commodity_normalized_group.label("a"),
            no_text.label("b"), no_text.label("c"), cast(func.sum(c.quantity), Float).label("value"),
        )
        .where(c.quantity_unit == "MT", c.combined_date.is_not(None), c.quantity.is_not(None))
        .group_by(day, c.commodity_normalized_group)
    )
    units = (
        select(literal("units", String), no_day, c.quantity_unit, no_text, no_text, cast(func.count(), Float))
        .where(c.quantity.is_not(None), or_(c.quantity_unit.is_(None), c.quantity_unit != "MT"))
        .group_by(c.quantity_unit)
    )
    vessels = (
        select(
            literal("vessels", String), no_day, c.port_unlocode, c.port_name, c.vessel_status,
            cast(func.count(func.nullif(c.vessel_key, "").distinct()), Float),
        )
        .group_by(c.port_unlocode, c.port_name, c.vessel_status)
    )
    return union_all(tonnes, units, vessels)
