"""Stored records as the merge engine's input frame (contract C2.1).

One row per stored record of the given feeds whose commodity is not blank (C1: kept
in the store, never served), with the feed's name as `source_name`, times as
`datetime64[ns, UTC]`, the commodity's taxonomy names, and the merge key parts
`vessel_key` and `commodity_key`. Text columns other than `ref` are categoricals with
sorted categories (`store.merging.columns`): the merge engine and the CSV writer work on
their codes.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
from store.frames import pd
from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from store.merging import columns
from store.merging.resolve import Identities
from store.normalize import commodity_text_key
from store.database.schema import Feed, Record
from store.merging.merge_plan import NAT
from store.reference.taxonomy import default_taxonomy

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


def load_records_where(session: Session, feed_ids: Iterable[str], any_of: list) -> pd.DataFrame:
    """The merge input of the feeds `feed_ids`, only the records that meet one of the
    clauses `any_of` (none: no record)."""
    if not any_of:
        return load_records(session, [])
    return _load(session, Record.feed_id.in_(sorted(set(feed_ids))), Record.commodity.is_not(None), or_(*any_of))


def load_identities(session: Session, feed_ids: Iterable[str], names: Iterable[str] | None = None) -> Identities:
    """Rule 1's identities (issue 19) among the served records of the feeds `feed_ids`:
    the name keys that records with an IMO number carry, with the feeds that give each;
    only of the name keys `names` when given (read by index: `records.name_key`)."""
    feed_ids = sorted(set(feed_ids))
    statement = select(Record.name_key, Record.vessel_key, Feed.name).join(Feed, Feed.id == Record.feed_id).distinct()
    if names is None:
        return Identities.of_keys(session.execute(statement.where(*_identity_where(feed_ids))).all())
    return Identities.of_keys(_in_chunks(session, statement.where(*_identity_where(feed_ids)), Record.name_key, names))


def identity_rows(session: Session, feed_ids: Iterable[str], names: Iterable[str]) -> list[tuple[str, str, str]]:
    """As `load_identities` of `names`, as rows (name key, IMO key, feed id): for a
    caller that keeps them for several sets of feeds."""
    statement = select(Record.name_key, Record.vessel_key, Record.feed_id).distinct()
    return _in_chunks(session, statement.where(*_identity_where(sorted(set(feed_ids)))), Record.name_key, names)


def _identity_where(feed_ids: list[str]) -> list:
    return [
        Record.feed_id.in_(feed_ids),
        Record.vessel_key.like("IMO%"),
        Record.name_key.is_not(None),
        Record.commodity.is_not(None),
    ]


def name_keys_of(session: Session, feed_ids: Iterable[str], vessel_keys: Iterable[str]) -> set[str]:
    """The name keys that the served records of `feed_ids` with vessel key in
    `vessel_keys` carry."""
    return {name for _, name, _ in names_carried(session, feed_ids, vessel_keys)}


def names_carried(session: Session, feed_ids: Iterable[str], vessel_keys: Iterable[str]) -> list[tuple[str, str, str]]:
    """The (vessel key, name key, feed id) of the served records of `feed_ids` with
    vessel key in `vessel_keys`. Null names are dropped here, not in SQL: with
    `name_key IS NOT NULL` in the statement SQLite walked the name index over every
    record of the feeds instead of probing the vessel index (0.7 s instead of 0.1 s
    for 1,000 keys at 250,000 records, with the feed-led indexes of migration 0007)."""
    statement = (
        select(Record.vessel_key, Record.name_key, Record.feed_id)
        .where(Record.feed_id.in_(sorted(set(feed_ids))), Record.commodity.is_not(None))
        .distinct()
    )
    return [row for row in _in_chunks(session, statement, Record.vessel_key, vessel_keys) if row[1] is not None]


def name_ports(session: Session, feed_ids: Iterable[str], names: Iterable[str]) -> list[tuple[str, str, str]]:
    """The (name key, port, feed id) of the served name-only records of `feed_ids`
    (vessel key `NAME:…`) under the name keys `names`."""
    statement = (
        select(Record.vessel_key, Record.port_unlocode, Record.feed_id)
        .where(Record.feed_id.in_(sorted(set(feed_ids))), Record.commodity.is_not(None))
        .distinct()
    )
    return _in_chunks(session, statement, Record.vessel_key, names)


def _in_chunks(session: Session, statement, column, values: Iterable[str]) -> list[tuple]:
    """The rows of `statement` where `column` is one of `values`, an IN list at a time."""
    values = sorted(set(values))
    rows: list[tuple] = []
    for start in range(0, len(values), _IN_LIST):
        rows += _driver_rows(session, statement.where(column.in_(values[start : start + _IN_LIST])))
    return rows


def _driver_rows(session: Session, statement) -> list[tuple]:
    """The rows of `statement` as the driver gives them (text columns only: no type
    conversions to skip), without SQLAlchemy's row objects (1.5 µs a row: 0.2 s of a
    daily update's 140,000 rows of lookups at 1,000,000 records)."""
    cursor = _execute(session, statement)
    try:
        return cursor.fetchall()
    finally:
        cursor.close()


def _execute(session: Session, statement):
    """A DBAPI cursor, in the session's transaction, that ran `statement`."""
    connection = session.connection()
    compiled = statement.compile(dialect=connection.dialect, compile_kwargs={"render_postcompile": True})
    params = compiled.construct_params()
    if compiled.positional:
        params = tuple(params[name] for name in compiled.positiontup)
    cursor = connection.connection.cursor()
    try:
        cursor.execute(str(compiled), params)
    except BaseException:
        cursor.close()
        raise
    return cursor


#: Values per IN list (SQLite allows 32,766 parameters, PostgreSQL 65,535).
_IN_LIST = 5_000


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
    cursor = _execute(session, statement)
    try:
        chunks = []
        while rows := cursor.fetchmany(_CHUNK):
            chunks.append(_columns(names, rows))
    finally:
        cursor.close()
    if not chunks:
        frame = pd.DataFrame({name: pd.Series([], dtype=object) for name in names})
        return shape(frame.astype({name: "category" for name in names if name not in _NOT_CODED}))
    data = {}
    for name in names:
        parts = [chunk[name] for chunk in chunks]
        if isinstance(parts[0], tuple):  # a text column: (codes, uniques) per chunk
            data[name] = columns.from_parts([p[0] for p in parts], [p[1] for p in parts])
        else:
            data[name] = _concat(parts)
    return shape(pd.DataFrame(data))


#: Rows read from the driver at a time.
_CHUNK = 50_000
#: Columns with a value of their own on (almost) every row: not worth coding.
_UNIQUE = frozenset({"ref"})
_NOT_CODED = frozenset({*_TIMES, "dwt", "quantity", *_UNIQUE})


def _columns(names: list[str], rows: list[tuple]) -> dict[str, object]:
    """One chunk of driver rows as columns: times as datetime64 (SQLite gives
    integer nanoseconds, `schema.RecordTime`; PostgreSQL datetimes), text columns
    factorized, (codes, distinct values), to
    become categoricals (`store.merging.columns`: a feed repeats its ports and companies on
    every row)."""
    out: dict[str, object] = {}
    for name, values in zip(names, zip(*rows)):
        array = np.array(values, dtype=object)
        if name in _TIMES:
            out[name] = _times(array)
        elif name in ("dwt", "quantity") or name in _UNIQUE:
            out[name] = array
        else:
            codes, uniques = pd.factorize(array)
            out[name] = (codes, np.asarray(uniques, dtype=object))
    return out


def _times(values: np.ndarray) -> np.ndarray:
    """Driver values of a time column as naive UTC datetime64[ns] (NaT for None)."""
    present = values != None  # noqa: E711 - elementwise on an object array
    if present.any() and isinstance(values[present.argmax()], (int, np.integer)):  # SQLite
        return np.where(present, values, NAT).astype(np.int64).view("M8[ns]")
    return pd.to_datetime(values, utc=True).tz_convert(None).as_unit("ns").to_numpy()


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


def shape(frame: pd.DataFrame) -> pd.DataFrame:
    """Give a frame of stored rows the merge input's dtypes and derived columns: text
    columns categorical (`store.merging.columns`), the commodity's taxonomy names and the
    merge key part `commodity_key`, worked out once per distinct value."""
    for column in _TIMES:
        frame[column] = pd.to_datetime(frame[column], utc=True).astype("datetime64[ns, UTC]")
    frame["dwt"] = pd.array(frame["dwt"], dtype="Int64")
    frame["quantity"] = pd.to_numeric(frame["quantity"], errors="coerce").astype(float)
    for name in frame.columns:
        if name not in _NOT_CODED and not columns.is_coded(frame[name]):
            frame[name] = columns.category(frame[name])
    taxonomy = default_taxonomy()
    leaf_column, commodity = frame["commodity_leaf"].array, frame["commodity"].array
    leaves = [_leaf(taxonomy, leaf_id) for leaf_id in leaf_column.categories]
    for name, part in (("commodity_normalized", "name"), ("commodity_normalized_subgroup", "subgroup"),
                       ("commodity_normalized_group", "group")):
        frame[name] = columns.recoded(leaf_column, [getattr(l, part) if l else None for l in leaves])
    # The key: the leaf's id when resolved, else the raw commodity's text key; once
    # per distinct (leaf, commodity) pair.
    pairs = leaf_column.codes.astype(np.int64) * (len(commodity.categories) + 1) + commodity.codes + 1
    which, distinct = pd.factorize(pairs)
    raw = np.asarray(commodity.categories, dtype=object)
    keys = []
    for pair in distinct.tolist():
        leaf_code, commodity_code = divmod(pair, len(commodity.categories) + 1)
        leaf = leaves[leaf_code] if leaf_code >= 0 else None
        if leaf is not None:
            keys.append(leaf.id)
        else:
            keys.append(None if commodity_code == 0 else "raw:" + commodity_text_key(raw[commodity_code - 1]))
    frame["commodity_key"] = columns.recoded(pd.Categorical.from_codes(which, categories=range(len(distinct))), keys)
    return frame.drop(columns=["commodity_leaf"])


def _leaf(taxonomy, leaf_id):
    try:
        return taxonomy.leaf(leaf_id)
    except KeyError:  # a leaf that a newer taxonomy dropped: treat as unresolved
        return None
