"""Merged rows as table rows (`store.database.schema.MergedRow`) and back (C1, C2).

The merge engine's frames hold times as datetime64[ns, UTC], text as categoricals or
objects; the table keeps times as int64 nanoseconds since the epoch (so that sorting,
`from`/`to` and `latest` compare integers on every back end), text as text, and a few
derived columns (the sort key, folded names for filters). `frame_of` gives back frames
shaped like the merge engine's output, which the JSON and CSV renderers take.
"""

from __future__ import annotations

import itertools
from typing import Iterator, Sequence

import numpy as np
import pandas as pd
from sqlalchemy import Connection, delete, select, text, tuple_

from store.fields import RECORD_FIELDS, TIME_FIELDS, is_blank
from store.database.schema import MergedRow
from store.merging.merge_plan import NAT, nanos

#: The sort key of a row without a date: after every date (C3).
LAST = np.iinfo(np.int64).max
#: Table columns in the order rows are written.
COLUMNS: tuple[str, ...] = tuple(column.name for column in MergedRow.__table__.columns)
#: What a read takes: the served fields (C1) and what the engine's frames carry beside.
READ_COLUMNS: tuple[str, ...] = (*RECORD_FIELDS, "vessel_key", "commodity_key", "span_end", "members")
_INTEGERS = frozenset({"sort_key", "view_id", "members", "dwt", "span_end", *TIME_FIELDS})
#: (vessel key, port) pairs per IN list (two parameters each; SQLite allows 32,766).
_PAIRS_CHUNK = 5_000


def fold(text: object) -> str:
    """Text as the C3 filters compare it: whitespace collapsed, case folded."""
    return " ".join(str(text).split()).casefold()


def table_rows(view_id: int, merged: pd.DataFrame) -> tuple[list[str], Iterator[tuple]]:
    """`(columns, rows)`: the merged rows of `merged` (`store.merging.merge.merge`) as rows of
    `merged_rows` for the view `view_id`, Python values ready for a DB-API driver, in
    primary-key order (sort key, id): the clustered table then grows at its end
    instead of splitting pages all over."""
    combined = nanos(merged["combined_date"])
    order = np.lexsort((pd.factorize(merged["id"], sort=True)[0], np.where(combined == NAT, LAST, combined)))
    merged = merged.iloc[order].reset_index(drop=True)
    n = len(merged)
    values: dict[str, list] = {"view_id": [view_id] * n}
    for field in TIME_FIELDS:
        values[field] = _optional_ints(nanos(merged[field]), NAT)
    combined = nanos(merged["combined_date"])
    values["sort_key"] = np.where(combined == NAT, LAST, combined).tolist()
    values["span_end"] = _optional_ints(nanos(merged["_span_end"]), NAT)
    values["dwt"] = [None if pd.isna(v) else int(v) for v in merged["dwt"].array]
    quantity = pd.to_numeric(merged["quantity"]).to_numpy(dtype=float)
    values["quantity"] = np.where(np.isnan(quantity), None, quantity).tolist()
    values["members"] = merged["_members"].astype(np.int64).tolist()
    values["is_top"] = tops(merged).astype(int).tolist()
    for name in COLUMNS:
        if name in values or name in ("country_key", "port_name_key"):
            continue
        values[name] = _texts(merged[name])
    values["vessel_key"] = ["" if v is None or is_blank(v) else v for v in values["vessel_key"]]
    values["country_key"] = _folded(merged["country_name"])
    values["port_name_key"] = _folded(merged["port_name"])
    columns = list(COLUMNS)
    return columns, zip(*(values[name] for name in columns))


def tops(merged: pd.DataFrame) -> np.ndarray:
    """Per row, whether C3's `latest` keeps it of its (vessel key, port) among all of
    `merged`: the latest combined_date (any over none), then the latest updated_at,
    then the lowest id. Blank vessel keys count as one vessel, as in the table."""
    vessels = merged["vessel_key"].astype(object).where(merged["vessel_key"].notna(), "")
    return _tops(vessels, merged["port_unlocode"], nanos(merged["combined_date"]), nanos(merged["updated_at"]), merged["id"])


def _tops(vessels, ports, dates: np.ndarray, updated: np.ndarray, ids) -> np.ndarray:
    """`tops` on columns: times as int64 ns, NAT for none."""
    if not len(dates):
        return np.zeros(0, dtype=bool)
    vessel, port = pd.factorize(vessels)[0], pd.factorize(ports)[0]
    # Ranks, exact (ns as float would round): NaT is the smallest int64, so it loses.
    date = pd.factorize(dates, sort=True)[0]
    later = pd.factorize(updated, sort=True)[0]
    ranks = pd.factorize(ids, sort=True)[0]  # the lower id wins ties
    order = np.lexsort((ranks, -later, -date, port, vessel))
    first = np.ones(len(order), dtype=bool)
    first[1:] = (vessel[order][1:] != vessel[order][:-1]) | (port[order][1:] != port[order][:-1])
    top = np.zeros(len(dates), dtype=bool)
    top[order[first]] = True
    return top


def _optional_ints(values: np.ndarray, missing: int) -> list:
    out = values.astype(object)
    out[values == missing] = None
    return out.tolist()


def _texts(series: pd.Series) -> list:
    """A text column as str or None, each distinct value converted once."""
    codes, uniques = pd.factorize(series)
    table = np.array([None if pd.isna(v) else str(v) for v in uniques] + [None], dtype=object)
    return table[codes].tolist()


def _folded(series: pd.Series) -> list:
    codes, uniques = pd.factorize(series)
    table = np.array([None if pd.isna(v) else fold(v) for v in uniques] + [None], dtype=object)
    return table[codes].tolist()


def insert_rows(connection: Connection, columns: Sequence[str], rows: Iterator[tuple], chunk: int = 20_000) -> int:
    """Write `rows` into `merged_rows` with the driver's executemany, a chunk at a
    time, in the connection's transaction; returns how many were written."""
    statement = f"INSERT INTO merged_rows ({', '.join(columns)}) VALUES ({', '.join(['{m}'] * len(columns))})"
    rows, written = iter(rows), 0
    while batch := list(itertools.islice(rows, chunk)):
        _execute_many(connection, statement, batch)
        written += len(batch)
    return written


def copy_rows(connection: Connection, from_view: int, to_view: int, without: Sequence[str] = ()) -> int:
    """Copy the rows of the view `from_view` into the view `to_view`, but those of the
    feeds `without`, in the database (in primary-key order: the new view's part of
    the table is written in order); returns how many. Written as text: through
    SQLAlchemy's `insert().from_select()` the driver's row count of the statement came
    back as -1 on PostgreSQL, and the view's `row_count` is taken from it."""
    names = [name for name in COLUMNS if name != "view_id"]
    listed = ", ".join(names)
    params: dict[str, object] = {"to_view": to_view, "from_view": from_view}
    skip = ""
    if without:
        marks = ", ".join(f":w{i}" for i in range(len(without)))
        skip = f" AND source_id NOT IN ({marks})"
        params.update({f"w{i}": feed for i, feed in enumerate(without)})
    statement = text(
        f"INSERT INTO merged_rows (view_id, {listed}) SELECT :to_view, {listed} FROM merged_rows"
        f" WHERE view_id = :from_view{skip} ORDER BY sort_key, id"
    )
    return connection.execute(statement, params).rowcount


def replace_pair_rows(
    connection: Connection, view_id: int, pairs: Sequence[tuple[str, str]], merged: pd.DataFrame,
    sources: frozenset[str] | None = None,
) -> tuple[int, int]:
    """Replace the view's rows of the (vessel key, port) `pairs` with `merged`, the
    merge of those pairs' records; returns `(removed, written)`. With `sources`, see
    `_replace_feed_rows`."""
    if sources is not None:
        return _replace_feed_rows(connection, view_id, pairs, merged, sources)
    table = MergedRow.__table__
    removed = 0
    for chunk in pair_chunks(pairs):
        removed += connection.execute(delete(table).where(table.c.view_id == view_id, _of_pairs(chunk))).rowcount
    return removed, insert_rows(connection, *table_rows(view_id, merged))


def _of_pairs(pairs: list[tuple[str, str]]):
    """The rows of the (vessel key, port) `pairs`, found through the (view, vessel,
    port) index: SQLite answers a row-value IN list alone by reading the view's whole
    part of that index (18 ms warm, 0.27 s cold for a 250,000-row view, growing with
    the view; per statement, per view an update touches), and with the vessels' own
    IN list beside it probes the index per vessel (1.7 ms)."""
    table = MergedRow.__table__
    vessels = table.c.vessel_key.in_(sorted({vessel for vessel, _ in pairs}))
    return vessels & tuple_(table.c.vessel_key, table.c.port_unlocode).in_(pairs)


def _replace_feed_rows(
    connection: Connection, view_id: int, pairs: Sequence[tuple[str, str]], merged: pd.DataFrame, sources: frozenset[str]
) -> tuple[int, int]:
    """For a `by_source` view of which only the feeds `sources` changed: `merged`
    holds only those feeds' rows of the pairs, and only their rows are deleted and
    written. Each feed's `by_source` rows are its own merge (C2.6), so the other
    feeds' rows stay as they are and need not be loaded or merged again; only the
    `is_top` marks (C3's `latest`, within a pair) are worked out again among the
    stored rows kept and the new ones, and written where they moved. Every row
    deleted or written touches the table and its five indexes, and those pages are
    most of the commit: a daily update into one feed of a twenty-feed view writes
    about a fifth of the rows it used to."""
    stored = _marks(connection, view_id, pairs)
    kept = [row for row in stored if row[_SOURCE] not in sources]
    _delete_keys(connection, view_id, [row for row in stored if row[_SOURCE] in sources])
    columns, rows = table_rows(view_id, merged)
    new = list(rows)
    at = {name: columns.index(name) for name in _MARK_COLUMNS}
    both = [tuple(row[at[name]] for name in _MARK_COLUMNS) for row in new] + kept
    top = _stored_tops(both)
    top_at = at["is_top"]
    new = [(*row[:top_at], int(mark), *row[top_at + 1 :]) for row, mark in zip(new, top[: len(new)])]
    moved = [(int(mark), view_id, row[0], row[1]) for row, mark in zip(kept, top[len(new) :]) if mark != row[_TOP]]
    _execute_many(connection, "UPDATE merged_rows SET is_top = {m} WHERE view_id = {m} AND sort_key = {m} AND id = {m}", moved)
    return len(stored) - len(kept), insert_rows(connection, columns, iter(new))


#: What `_replace_feed_rows` reads of the stored rows (the primary key first).
_MARK_COLUMNS = ("sort_key", "id", "source_id", "vessel_key", "port_unlocode", "combined_date", "updated_at", "is_top")
_SOURCE, _TOP = _MARK_COLUMNS.index("source_id"), _MARK_COLUMNS.index("is_top")


def _marks(connection: Connection, view_id: int, pairs: Sequence[tuple[str, str]]) -> list[tuple]:
    """The view's stored rows of `pairs`, as tuples of `_MARK_COLUMNS`."""
    table = MergedRow.__table__
    statement = select(*(table.c[name] for name in _MARK_COLUMNS)).where(table.c.view_id == view_id)
    out: list[tuple] = []
    for chunk in pair_chunks(pairs):
        out += [tuple(row) for row in connection.execute(statement.where(_of_pairs(chunk)))]
    return out


def _stored_tops(rows: list[tuple]) -> np.ndarray:
    """`tops` of rows given as tuples of `_MARK_COLUMNS` (times as int ns or None)."""
    if not rows:
        return np.zeros(0, dtype=bool)
    _, ids, _, vessels, ports, dates, updated, _ = (np.array(column, dtype=object) for column in zip(*rows))
    dates = np.where(dates == None, NAT, dates).astype(np.int64)  # noqa: E711 - elementwise
    return _tops(vessels, ports, dates, updated.astype(np.int64), ids)


def _delete_keys(connection: Connection, view_id: int, rows: list[tuple]) -> None:
    """Delete the rows (tuples whose first two values are sort_key and id) of the view."""
    keys = [(view_id, row[0], row[1]) for row in rows]
    _execute_many(connection, "DELETE FROM merged_rows WHERE view_id = {m} AND sort_key = {m} AND id = {m}", keys)


def _execute_many(connection: Connection, statement: str, params: list[tuple]) -> None:
    """`statement` (`{m}` for each parameter mark) once per tuple of `params`, with
    the driver's executemany in the connection's transaction."""
    if not params:
        return
    mark = "?" if connection.dialect.name == "sqlite" else "%s"
    cursor = connection.connection.cursor()
    try:
        cursor.executemany(statement.format(m=mark), params)
    finally:
        cursor.close()


def pair_chunks(pairs: Sequence[tuple[str, str]]) -> Iterator[list]:
    """`pairs` a parameter list at a time (two parameters a pair)."""
    for start in range(0, len(pairs), _PAIRS_CHUNK):
        yield list(pairs[start : start + _PAIRS_CHUNK])


def frame_of(rows: Sequence[Sequence], columns: Sequence[str] = READ_COLUMNS) -> pd.DataFrame:
    """Rows read from `merged_rows` (in `columns` order) as a frame shaped like the
    merge engine's output: times datetime64[ns, UTC], `dwt` Int64, `quantity` float,
    text as objects (None for blank), with `_span_end` and `_members` beside. Built
    column by column from numpy arrays in one DataFrame call (a page is ~100 rows:
    per-Series construction cost more than the query)."""
    n = len(rows)
    cells = np.empty((n, len(columns)), dtype=object)
    if n:
        cells[:] = rows
    data: dict[str, object] = {}
    for i, name in enumerate(columns):
        values = cells[:, i]
        if name in TIME_FIELDS or name == "span_end":
            missing = values == None  # noqa: E711 - elementwise on an object array
            ints = np.where(missing, NAT, values).astype(np.int64)
            data["_span_end" if name == "span_end" else name] = pd.DatetimeIndex(ints.view("M8[ns]")).tz_localize("UTC")
        elif name == "dwt":
            missing = values == None  # noqa: E711
            data[name] = pd.arrays.IntegerArray(np.where(missing, 0, values).astype(np.int64), missing.astype(bool))
        elif name == "quantity":
            data[name] = np.where(values == None, np.nan, values).astype(float)  # noqa: E711
        elif name == "members":
            data["_members"] = values.astype(np.int64)
        elif name == "vessel_key":
            data[name] = np.where(values == "", None, values)
        else:
            data[name] = values
    return pd.DataFrame(data, index=pd.RangeIndex(n), copy=False)
