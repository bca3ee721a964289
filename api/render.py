"""The two renderers of lineup rows: JSON and CSV (contract C1, C4, C9).

Both take the same page frame (the rows the query pipeline selected, C1 columns plus
internal ones, which are never written) and neither runs a query. JSON: C1 field
order, times `YYYY-MM-DDTHH:MM:SSZ`, blanks null, `dwt` an integer, `quantity` a
number. CSV: UTF-8 with a byte order mark, RFC 4180 (CRLF, quoting where needed), a
header of the C1 names in C1 order, blanks as empty cells, and text cells that a
spreadsheet would run as a formula prefixed with `'`.

The CSV text is `store.views.csvtext`'s, the writer the explorer's download shares; this
module gives it the API's names.

Speed: a column holds few distinct values (ports, companies, statuses), so each is
converted and JSON-encoded once per distinct value, and rows are joined from the
ready-made cells.
"""

from __future__ import annotations

import json
from typing import Any, Callable

import numpy as np
import pandas as pd

from store.views import csvtext
from store.fields import INTEGER_FIELDS, NUMBER_FIELDS, RECORD_FIELDS, TIME_FIELDS, text_value

JSON_TYPE = "application/json; charset=UTF-8"
CSV_TYPE = csvtext.CSV_TYPE
BOM = csvtext.BOM
#: Rows per chunk of a streamed CSV export.
CHUNK_ROWS = csvtext.CHUNK_ROWS


# ---------------------------------------------------------------- values
def _time_values(uniques: Any) -> list[str | None]:
    stamps = pd.DatetimeIndex(uniques)
    stamps = stamps.tz_convert("UTC") if stamps.tz is not None else stamps.tz_localize("UTC")
    text = np.datetime_as_string(stamps.tz_localize(None).to_numpy(dtype="datetime64[s]"), unit="s")
    return [t + "Z" for t in text.tolist()]


def _values(column: pd.Series, field: str) -> tuple[np.ndarray, list[Any]]:
    """`(codes, values)`: each row's index into `values`, the distinct JSON values of
    the column (the last one None, for the rows that have no value)."""
    if field in TIME_FIELDS and not isinstance(column.dtype, pd.DatetimeTZDtype):
        column = pd.to_datetime(column, utc=True)
    codes, uniques = pd.factorize(column)
    if field in TIME_FIELDS:
        values: list[Any] = _time_values(uniques)
    elif field in INTEGER_FIELDS:
        values = [int(v) for v in np.asarray(uniques, dtype=np.int64).tolist()]
    elif field in NUMBER_FIELDS:
        values = np.asarray(uniques, dtype=float).tolist()
    else:
        values = [text_value(v) for v in uniques]
    return codes, values + [None]


def _cells(frame: pd.DataFrame, field: str, encode: Callable[[Any], Any]) -> list[Any]:
    """The column `field` of `frame`, each distinct value passed once to `encode`."""
    codes, values = _values(frame[field], field)
    return np.array([encode(v) for v in values], dtype=object)[codes].tolist()


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows of `frame` as C1 records (dicts in C1 field order, JSON types)."""
    columns = [_cells(frame, field, lambda v: v) for field in RECORD_FIELDS]
    return [dict(zip(RECORD_FIELDS, values)) for values in zip(*columns)]


# ---------------------------------------------------------------- JSON
def dumps(payload: Any) -> bytes:
    """Compact UTF-8 JSON; NaN is refused rather than written as invalid JSON."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


def _member(field: str) -> Callable[[Any], str]:
    prefix = json.dumps(field) + ":"
    return lambda value: prefix + json.dumps(value, ensure_ascii=False, allow_nan=False)


def json_objects(frame: pd.DataFrame) -> list[bytes]:
    """Each row of `frame` as the JSON text of its C1 record (keys in C1 order)."""
    columns = [_cells(frame, field, _member(field)) for field in RECORD_FIELDS]
    return [("{" + ",".join(row) + "}").encode("utf-8") for row in zip(*columns)]


def json_body(objects: list[bytes], next_cursor: str | None) -> bytes:
    """The /v1/lineups JSON body from encoded rows: `data`, `next_cursor` and its alias
    `nextCursor` (C4)."""
    cursor = dumps(next_cursor)
    # One join of every piece, commas included: a join of the rows inside the join of
    # the body made the ~100 KB body twice and took ten times as long (an allocation
    # of that size is fresh memory from the operating system each time).
    parts = [b","] * max(2 * len(objects) + 1, 2)
    parts[0] = b'{"data":['
    parts[1:-1:2] = objects
    parts[-1] = b'],"next_cursor":' + cursor + b',"nextCursor":' + cursor + b"}"
    return b"".join(parts)


def json_page(frame: pd.DataFrame, next_cursor: str | None) -> bytes:
    """The /v1/lineups JSON body of the rows of `frame`."""
    return json_body(json_objects(frame), next_cursor)


# ---------------------------------------------------------------- CSV
# One CSV writer for the API, share links and the explorer: `store.views.csvtext`.
csv_header = csvtext.csv_header
csv_block = csvtext.csv_block
csv_lines = csvtext.csv_lines
csv_rows = csvtext.csv_rows
csv_chunks = csvtext.csv_chunks
neutralise = csvtext.neutralise


def csv_page(frame: pd.DataFrame) -> bytes:
    """One page as a whole CSV document: BOM, header, rows."""
    return csvtext.csv_document(frame)
