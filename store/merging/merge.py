"""The merge engine: stored records in, one clean row per vessel call out (contract C2).

Pure functions, DataFrame in and DataFrame out: no session, no I/O, no state kept
between calls (each call borrows one helper thread for numpy work that releases the
GIL, and returns it). `merge` is what the query pipeline (C3) runs; `merge_groups` also says
which merged row each record went into (provenance, `store.merging.explain`). The parts:
`store.merging.merge_plan` forms the groups (C2.2–C2.4, C2.6), `store.merging.merge_values` picks the
values (C2.5), `store.merging.merge_ids` makes the ids (C2.7); this module puts them together.

The input frame has one row per stored record: `ref`, `source_id`, `source_name`,
`vessel_key`, `commodity_key` and the record fields of C1 (times as datetime64 UTC,
`dwt` Int64, `quantity` float; text categorical or object). Blanks are expected as null (the store normalises
them at ingest; `normalize_blanks` does it for raw data). Records with a blank
commodity are left out (C1). The output has the C1 columns in `RECORD_FIELDS` order,
then `EXTRA_COLUMNS`, which are not served:

- `vessel_key`, `commodity_key`: the group's merge key parts (C2.2).
- `_anchor_first`: the group's earliest anchor (C2.3, C2.7); NaT for a dateless record.
- `_span_end`: the latest of the merged eta/etb/etd. With `combined_date` as its start
  this is the schedule span that the `from`/`to` filter overlaps (C3).
- `_members`: how many records the row merges.

Rows come in no particular order; `store.query.sort_rows` gives the C3 order. Times
are datetime64[ns, UTC]. Text columns that come in as categoricals (the store's,
`store.merging.columns`) are picked on their codes and come out as categoricals with the same
categories, and so do `source_id` and `source_name`; object text columns (str,
None/NaN for null) come out as object columns with None for null. `id` is an object
column.
"""

from __future__ import annotations

from concurrent.futures import Executor, ThreadPoolExecutor

import numpy as np
from store.frames import pd

from store.merging import merge_ids, merge_values
from store.merging.columns import is_coded
from store.fields import (
    COUNTERPARTY_FIELDS,
    DATE_FIELDS,
    INTEGER_FIELDS,
    NUMBER_FIELDS,
    RECORD_FIELDS,
    TIME_FIELDS,
)
from store.fields import MERGE_MODES as MODES
from store.merging.resolve import Identities, Resolution, resolve
from store.merging.merge_plan import NAT, Codes, Plan, RecordArrays, blank_mask, factorized, group_records, nanos

#: Columns of the output after RECORD_FIELDS (see the module docstring).
EXTRA_COLUMNS: tuple[str, ...] = ("vessel_key", "commodity_key", "_anchor_first", "_span_end", "_members")

#: Fields whose merged value is the latest non-blank one (C2.5); the others are derived.
PICKED_FIELDS: tuple[str, ...] = tuple(
    f
    for f in RECORD_FIELDS
    if f not in ("id", "source_id", "source_name", "combined_date", "created_at", "updated_at")
)
_TIME_COLUMNS = frozenset(
    (*DATE_FIELDS, "combined_date", "created_at", "updated_at", "_anchor_first", "_span_end")
)


def merge(records: pd.DataFrame, mode: str = "all", identities: Identities | None = None) -> pd.DataFrame:
    """The merged rows of `records` (C2): one per group, columns `RECORD_FIELDS` then
    `EXTRA_COLUMNS`. `mode` is "all" or "by_source" (C2.6); anything else raises
    ValueError. Under "all", vessels and commodities are resolved first (issue 19,
    `store.merging.resolve`) with `identities`, those of `records` unless given (a
    caller that merges part of a view's records passes the whole view's)."""
    return _merged(records, mode, identities)[0]


def merge_groups(
    records: pd.DataFrame, mode: str = "all", identities: Identities | None = None
) -> tuple[pd.DataFrame, pd.Series]:
    """The merged rows of `records` (as `merge`) and the membership: a Series on
    `records.index` giving the id of the row each record went into, None for records
    with a blank commodity (never served, C1). Raises ValueError for an unknown mode."""
    return merge_resolved(records, mode, identities)[:2]


def merge_resolved(
    records: pd.DataFrame, mode: str = "all", identities: Identities | None = None
) -> tuple[pd.DataFrame, pd.Series, Resolution | None]:
    """`merge_groups` and the resolution of issue 19 (None under by_source), for
    provenance."""
    rows, groups, resolution = _merged(records, mode, identities)
    ids = np.append(rows["id"].to_numpy(dtype=object), None)
    membership = pd.Series(ids[groups.labels()], index=records.index, dtype=object, name="id")
    return rows, membership, resolution


def normalize_blanks(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of `frame` in which every text blank of C1 (empty, whitespace-only, N/A,
    TBC, TBN, in any case) is None, in every string column; other values are kept."""
    out = frame.copy()
    for name in out.columns:
        column = out[name]
        if not (column.dtype == object or pd.api.types.is_string_dtype(column.dtype)):
            continue
        codes, uniques = pd.factorize(column)
        blank = blank_mask(np.asarray(uniques, dtype=object))
        if blank.any():
            values = column.to_numpy(dtype=object, copy=True)
            values[(codes >= 0) & blank[np.maximum(codes, 0)]] = None
            out[name] = pd.Series(values, index=out.index, dtype=column.dtype)
    return out


def _merged(records: pd.DataFrame, mode: str, identities: Identities | None = None):
    if mode not in MODES:
        raise ValueError(f"merge mode must be one of {MODES}, not {mode!r}")
    resolution = None
    if mode == "all":  # issue 19 rules 1 and 2; by_source is C2 as it was (rule 3)
        resolution = resolve(records, identities)
        records = resolution.frame
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="merge") as helper:
        arrays, groups = group_records(records, mode == "by_source", helper)
        return _rows(records, arrays, groups, mode, helper), groups, resolution


def _rows(records: pd.DataFrame, arrays: RecordArrays, groups: Plan, mode: str, helper: Executor):
    """The merged rows: numeric columns are picked on `helper` while this thread picks
    the text columns (which need the GIL)."""
    numeric = {f: _numeric(f, records[f]) for f in PICKED_FIELDS}
    numeric = {f: v for f, v in numeric.items() if v is not None}
    created, updated = nanos(records["created_at"]), nanos(records["updated_at"])
    times = helper.submit(_numeric_columns, numeric, created, updated, arrays, groups)
    names = _sorted_codes(records["source_name"])
    name_sets = helper.submit(merge_values.value_sets, names, groups)
    columns: dict[str, object] = {}
    winners: dict[str, np.ndarray] = {}
    for field in PICKED_FIELDS:
        if field in numeric:
            continue
        column = records[field]
        if isinstance(column.dtype, pd.CategoricalDtype):  # the store's text columns
            codes, winners[field] = merge_values.pick_codes(column.cat.codes.to_numpy(), groups)
            columns[field] = pd.Categorical.from_codes(codes, dtype=column.dtype)
        else:
            values = column.to_numpy(dtype=object)
            columns[field], winners[field] = merge_values.pick_objects(values, groups)
    picked, id_sets = times.result()
    columns.update(picked)
    # The feed lists as categoricals when the input is coded: a few hundred distinct
    # lists serve the whole result.
    join = merge_values.joined_categorical if is_coded(records["source_id"]) else merge_values.joined
    columns["source_id"] = join(arrays.source, groups, id_sets)
    columns["source_name"] = join(names, groups, name_sets.result())
    columns["vessel_key"] = arrays.vessel.values_at(groups.top)
    columns["commodity_key"] = arrays.commodity.values_at(groups.top)
    columns["_members"] = groups.sizes.astype(np.int64)
    columns["id"] = _ids(arrays, groups, winners, columns["_anchor_first"], mode)
    return _frame(columns, groups.n_groups)


def _numeric(field: str, series: pd.Series):
    """(values, blank mask, fill) of a time, integer or number field (C1); None for
    text."""
    if field in TIME_FIELDS:
        values = nanos(series)
        return values, values == NAT, NAT
    if field in INTEGER_FIELDS:
        array = pd.array(series, dtype="Int64")
        return array.to_numpy(dtype=np.int64, na_value=0), np.asarray(array.isna()), 0
    if field in NUMBER_FIELDS:
        values = pd.to_numeric(series).to_numpy(dtype=np.float64, na_value=np.nan)
        return values, np.isnan(values), np.nan
    return None


def _numeric_columns(numeric: dict, created, updated, arrays: RecordArrays, groups: Plan):
    """The numeric merged columns (picked fields, created/updated, combined_date, the
    span end, the first anchor) and the groups' sets of feeds. Numpy only: runs on the
    helper thread."""
    columns: dict[str, np.ndarray] = {}
    for field, (values, blank, fill) in numeric.items():
        columns[field], rows = merge_values.pick_numbers(values, blank, groups, fill)
        if field == "dwt":
            columns[field] = pd.arrays.IntegerArray(columns[field], rows < 0)
    dates = np.column_stack([columns[f] for f in DATE_FIELDS])
    columns["combined_date"] = merge_values.row_earliest(dates)
    columns["_span_end"] = merge_values.row_latest(dates)
    columns["created_at"] = merge_values.earliest(created, groups)
    columns["updated_at"] = merge_values.latest(updated, groups)
    columns["_anchor_first"] = merge_values.earliest(arrays.anchor, groups)
    return columns, merge_values.value_sets(arrays.source, groups)


def _sorted_codes(series: pd.Series) -> Codes:
    return Codes(*factorized(series, sort=True))


def _ids(arrays: RecordArrays, groups: Plan, winners: dict, anchor_first: np.ndarray, mode: str):
    """C2.7's id of every group (`store.merging.merge_ids` lists the parts and the hash)."""
    n, top = groups.n_groups, groups.top
    parts = [
        _hashes(arrays.vessel, top),
        _hashes(arrays.port, top),
        _hashes(arrays.commodity, top),
        merge_ids.minute_hashes(anchor_first, anchor_first == NAT),
    ]
    parts += [_hashes(arrays.counterparties[f], winners[f]) for f in COUNTERPARTY_FIELDS]
    null = np.tile(merge_ids.text_hashes([None]), (n, 1))
    parts.append(_hashes(arrays.source, top) if mode == "by_source" else null)
    own = null.copy()
    loners = np.flatnonzero(~groups.mergeable)
    if len(loners):
        rows = top[loners]
        feeds = arrays.source.values_at(rows)
        own[loners] = merge_ids.text_hashes([f"{s}\x1f{r}" for s, r in zip(feeds, arrays.refs[rows])])
    parts.append(own)
    return merge_ids.row_ids(mode, parts, n)


def _hashes(column: Codes, rows: np.ndarray) -> np.ndarray:
    """The `merge_ids.text_hashes` of a coded column at `rows` (-1 or blank: null)."""
    table = merge_ids.text_hashes([*column.uniques, None])
    return table[np.where(rows >= 0, column.codes[np.maximum(rows, 0)], -1)]


def _frame(columns: dict, n: int) -> pd.DataFrame:
    data = {}
    for name in (*RECORD_FIELDS, *EXTRA_COLUMNS):
        value = columns[name]
        if name in _TIME_COLUMNS:
            data[name] = pd.Series(np.asarray(value).view("M8[ns]"), copy=False).dt.tz_localize("UTC")
        elif name == "dwt":
            data[name] = pd.Series(value, dtype="Int64", copy=False)
        elif name in ("quantity", "_members") or isinstance(value, pd.Categorical):
            data[name] = pd.Series(value, copy=False)
        else:
            data[name] = pd.Series(value, dtype=object, copy=False)
    return pd.DataFrame(data, index=pd.RangeIndex(n), copy=False)
