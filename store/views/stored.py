"""Merged rows as table rows (`store.database.schema.MergedRow`) and back (C1, C2).

The merge engine's frames hold times as datetime64[ns, UTC], text as categoricals or
objects; the table keeps times as int64 nanoseconds since the epoch (so that sorting,
`from`/`to` and `latest` compare integers on every back end), text as text, and a few
derived columns (the sort key, folded names for filters). `frame_of` gives back frames
shaped like the merge engine's output, which the JSON and CSV renderers take.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np
import pandas as pd
from sqlalchemy import Connection, delete, tuple_

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
#: Where a row of `COLUMNS` holds these.
_AT = {name: COLUMNS.index(name) for name in ("view_id", "sort_key", "id", "source_id", "is_top")}
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
    if merged.empty:
        return np.zeros(0, dtype=bool)
    vessel = pd.factorize(merged["vessel_key"].astype(object).where(merged["vessel_key"].notna(), ""))[0]
    port = pd.factorize(merged["port_unlocode"])[0]
    # Ranks, exact (ns as float would round): NaT is the smallest int64, so it loses.
    date = pd.factorize(nanos(merged["combined_date"]), sort=True)[0]
    updated = pd.factorize(nanos(merged["updated_at"]), sort=True)[0]
    ids = pd.factorize(merged["id"], sort=True)[0]  # the lower id wins ties
    order = np.lexsort((ids, -updated, -date, port, vessel))
    first = np.ones(len(order), dtype=bool)
    first[1:] = (vessel[order][1:] != vessel[order][:-1]) | (port[order][1:] != port[order][:-1])
    top = np.zeros(len(merged), dtype=bool)
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
    sqlite = connection.dialect.name == "sqlite"
    mark = "?" if sqlite else "%s"
    statement = f"INSERT INTO merged_rows ({', '.join(columns)}) VALUES ({', '.join([mark] * len(columns))})"
    cursor = connection.connection.cursor()
    written = 0
    try:
        batch: list[tuple] = []
        for row in rows:
            batch.append(row)
            if len(batch) >= chunk:
                cursor.executemany(statement, batch)
                written += len(batch)
                batch = []
        if batch:
            cursor.executemany(statement, batch)
            written += len(batch)
    finally:
        cursor.close()
    return written


def replace_pair_rows(
    connection: Connection, view_id: int, pairs: Sequence[tuple[str, str]], merged: pd.DataFrame,
    sources: frozenset[str] | None = None,
) -> tuple[int, int]:
    """Replace the view's rows of the (vessel key, port) `pairs` with `merged`, the
    merge of those pairs' records (C3's `is_top` is worked out among all of them);
    returns `(removed, written)`.

    With `sources` (a `by_source` view of which only those feeds changed), only the
    rows of those feeds are deleted and written: each feed's `by_source` rows are
    its own merge (C2.6), so the other feeds' rows stay as they are and only their
    `is_top` marks are set, where the pair's latest row moved. Every row deleted or
    written touches the table and its five indexes, and those pages are most of the
    commit: a daily update into one feed of a twenty-feed view writes about a fifth
    of the rows it used to."""
    columns, rows = table_rows(view_id, merged)
    table = MergedRow.__table__
    where = [table.c.view_id == view_id]
    kept: list[tuple] = []
    if sources is not None:
        where.append(table.c.source_id.in_(sorted(sources)))
        source = _AT["source_id"]
        rows = list(rows)
        kept = [row for row in rows if row[source] not in sources]
        rows = iter([row for row in rows if row[source] in sources])
    removed = 0
    for start in range(0, len(pairs), _PAIRS_CHUNK):
        chunk = list(pairs[start : start + _PAIRS_CHUNK])
        pair = tuple_(table.c.vessel_key, table.c.port_unlocode)
        removed += connection.execute(delete(table).where(*where, pair.in_(chunk))).rowcount
    written = insert_rows(connection, columns, rows)
    _set_tops(connection, kept)
    return removed, written


def _set_tops(connection: Connection, rows: Sequence[tuple]) -> None:
    """Give the stored `rows` (tuples of `COLUMNS`, found by primary key) their
    `is_top` mark, writing only those where it differs."""
    if not rows:
        return
    mark = "?" if connection.dialect.name == "sqlite" else "%s"
    statement = (
        f"UPDATE merged_rows SET is_top = {mark} "
        f"WHERE view_id = {mark} AND sort_key = {mark} AND id = {mark} AND is_top <> {mark}"
    )
    view_id, sort_key, id_, top = (_AT[name] for name in ("view_id", "sort_key", "id", "is_top"))
    cursor = connection.connection.cursor()
    try:
        cursor.executemany(statement, [(row[top], row[view_id], row[sort_key], row[id_], row[top]) for row in rows])
    finally:
        cursor.close()


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
