"""Stored records as the merge engine's input frame (contract C2.1).

One row per stored record of the given feeds whose commodity is not blank (C1: kept
in the store, never served), with the feed's name as `source_name`, times as
`datetime64[ns, UTC]`, the commodity's taxonomy names, and the merge key parts
`vessel_key` and `commodity_key`.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd
from sqlalchemy import select
from sqlalchemy.orm import Session

from store.normalize import commodity_text_key
from store.schema import Feed, Record
from store.taxonomy import default_taxonomy

_COLUMNS = (
    "ref", "port_unlocode", "port_name", "country_name", "berth_terminal", "vessel_imo",
    "vessel_name", "vessel_type", "dwt", "operation", "commodity", "quantity", "quantity_unit",
    "eta", "etb", "etd", "vessel_status", "shipper", "receiver", "charterer", "operator",
    "ship_agent", "vessel_key", "commodity_leaf", "created_at", "updated_at",
)
_TIMES = ("eta", "etb", "etd", "created_at", "updated_at")


def load_records(session: Session, feed_ids: Iterable[str]) -> pd.DataFrame:
    """The merge input of the feeds `feed_ids` (may be empty)."""
    feed_ids = sorted(set(feed_ids))
    return _load(session, Record.feed_id.in_(feed_ids), Record.commodity.is_not(None))


def load_changed(session: Session, feed_id: str, after_version: int) -> pd.DataFrame:
    """The records of one feed written after its `data_version` was `after_version`
    (`changed_version` greater), shaped like `load_records`. Unlike the merge input it
    keeps records whose commodity is now blank: their `ref` says which cached record
    they replace; the caller drops them from the merge input (C1)."""
    return _load(session, Record.feed_id == feed_id, Record.changed_version > after_version)


def _load(session: Session, *where) -> pd.DataFrame:
    """The rows of the statement, read a chunk at a time from the driver's cursor
    and built column by column (SQLAlchemy's per-row objects and per-value type
    conversions cost ~20 µs a record, more than all the rest at 1,000,000 records)."""
    statement = (
        select(Record.feed_id.label("source_id"), Feed.name.label("source_name"), *(getattr(Record, c) for c in _COLUMNS))
        .join(Feed, Feed.id == Record.feed_id)
        .where(*where)
    )
    names = ["source_id", "source_name", *_COLUMNS]
    connection = session.connection()
    compiled = statement.compile(dialect=connection.dialect, compile_kwargs={"render_postcompile": True})
    params = compiled.construct_params()
    if compiled.positional:
        params = tuple(params[name] for name in compiled.positiontup)
    cursor = connection.connection.cursor()  # the DBAPI cursor, in the session's transaction
    try:
        cursor.execute(str(compiled), params)
        chunks = []
        while rows := cursor.fetchmany(_CHUNK):
            chunks.append(_columns(names, rows))
    finally:
        cursor.close()
    if not chunks:
        frame = pd.DataFrame({name: pd.Series([], dtype=object) for name in names})
    else:
        frame = pd.DataFrame({name: _concat([chunk[name] for chunk in chunks]) for name in names})
    return shape(frame)


#: Rows read from the driver at a time.
_CHUNK = 50_000
#: Columns with a value of their own on (almost) every row: not worth sharing.
_UNIQUE = frozenset({"ref"})


def _columns(names: list[str], rows: list[tuple]) -> dict[str, object]:
    """One chunk of driver rows as columns: times parsed (SQLite gives text,
    PostgreSQL datetimes), text columns as object arrays in which equal values share
    one string object (a feed repeats its ports and companies on every row)."""
    out: dict[str, object] = {}
    for name, values in zip(names, zip(*rows)):
        array = np.array(values, dtype=object)
        if name in _TIMES:
            text = any(isinstance(v, str) for v in values[:1000])
            parsed = pd.to_datetime(array, utc=True, format="ISO8601" if text else None)
            out[name] = parsed.tz_convert(None).as_unit("ns").to_numpy()  # naive UTC
        elif name in ("dwt", "quantity") or name in _UNIQUE:
            out[name] = array
        else:
            codes, uniques = pd.factorize(array)
            out[name] = np.append(np.asarray(uniques, dtype=object), None)[codes]
    return out


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


def shape(frame: pd.DataFrame) -> pd.DataFrame:
    """Give a frame of stored rows the merge input's dtypes and derived columns."""
    for column in _TIMES:
        frame[column] = pd.to_datetime(frame[column], utc=True).astype("datetime64[ns, UTC]")
    frame["dwt"] = pd.array(frame["dwt"], dtype="Int64")
    frame["quantity"] = pd.to_numeric(frame["quantity"], errors="coerce").astype(float)
    taxonomy = default_taxonomy()
    leaves = {}
    for leaf_id in frame["commodity_leaf"].dropna().unique():
        try:
            leaves[leaf_id] = taxonomy.leaf(leaf_id)
        except KeyError:  # a leaf that a newer taxonomy dropped: treat as unresolved
            leaves[leaf_id] = None
    leaf = frame["commodity_leaf"].map(lambda leaf_id: leaves.get(leaf_id))  # None: unresolved
    frame["commodity_normalized"] = leaf.map(lambda l: l.name if l else None)
    frame["commodity_normalized_subgroup"] = leaf.map(lambda l: l.subgroup if l else None)
    frame["commodity_normalized_group"] = leaf.map(lambda l: l.group if l else None)
    raw_keys = {raw: "raw:" + commodity_text_key(raw) for raw in frame["commodity"].dropna().unique()}
    resolved = leaf.map(lambda l: l.id if l else None)
    frame["commodity_key"] = np.where(resolved.notna(), resolved, frame["commodity"].map(raw_keys))
    frame = frame.drop(columns=["commodity_leaf"])
    # The engine works on object columns of str/None (pandas 3 would infer its
    # NaN-based string dtype, which turns None into NaN).
    text = [c for c in frame.columns if isinstance(frame[c].dtype, pd.StringDtype)]
    return frame.astype({c: object for c in text}) if text else frame
