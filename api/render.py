"""The two renderers of lineup rows: JSON and CSV (contract C1, C4, C9).

Both take the same page (the rows the query pipeline selected, C1 columns plus
internal ones, which are never written) and neither runs a query: both write the rows
as read (CSV through Arrow columns of them, `csv_of_records`). JSON: C1 field order, times
`YYYY-MM-DDTHH:MM:SSZ`, blanks null, `dwt` an integer, `quantity` a number. CSV: UTF-8 with a byte order mark, RFC 4180 (CRLF, quoting where needed), a
header of the C1 names in C1 order, blanks as empty cells, and text cells that a
spreadsheet would run as a formula prefixed with `'`.

The CSV text is `store.views.csvtext`'s, the writer share links and the explorer's
download share; this module gives it the API's names.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

import numpy as np
import orjson

from store.views import csvtext
from store.views.stored import arrow_columns
from store.fields import INTEGER_FIELDS, NUMBER_FIELDS, RECORD_FIELDS, TIME_FIELDS, text_value

JSON_TYPE = "application/json; charset=UTF-8"
CSV_TYPE = csvtext.CSV_TYPE
BOM = csvtext.BOM


# ---------------------------------------------------------------- JSON
def _times(values: Sequence[Any]) -> list[str | None]:
    """A column of times kept as ns since the epoch (UTC; None when missing), to the
    second, as C1 writes them, in one numpy call: per value, datetime arithmetic cost
    ~1.5 us, 600 times a page of 100 rows."""
    present = [i for i, value in enumerate(values) if value is not None]
    out: list[str | None] = [None] * len(values)
    if present:
        seconds = np.array([values[i] // 1_000_000_000 for i in present], dtype="M8[s]")
        for i, text in zip(present, np.datetime_as_string(seconds).tolist()):
            out[i] = text + "Z"
    return out


def _integers(values: Sequence[Any]) -> list[int | None]:
    return [None if value is None else int(value) for value in values]


def _numbers(values: Sequence[Any]) -> list[float | None]:
    return [None if value is None or value != value else float(value) for value in values]  # NaN is no quantity


def _texts(values: Sequence[Any]) -> list[str | None]:
    """Text cells, each distinct value judged once (`text_value`: C1 blanks are None)."""
    known = {value: text_value(value) for value in set(values) if value is not None}
    return [None if value is None else known[value] for value in values]


#: How each C1 field's column of kept values becomes its JSON values.
_JSON_COLUMN: tuple[Callable[[Sequence[Any]], list], ...] = tuple(
    _times if field in TIME_FIELDS else _integers if field in INTEGER_FIELDS
    else _numbers if field in NUMBER_FIELDS else _texts
    for field in RECORD_FIELDS
)


def records(rows: Iterable[Sequence[Any]]) -> list[dict[str, Any]]:
    """Rows as the store reads them from the kept views (`store.views.stored.READ_COLUMNS`
    order: the C1 fields first, times as int ns) as C1 records: dicts in C1 field
    order, times `YYYY-MM-DDTHH:MM:SSZ`, blanks None, `dwt` an int, `quantity` a
    float. Converted a column at a time (a page's JSON is made on the event loop)."""
    columns = list(zip(*rows))
    if not columns:
        return []
    converted = [convert(column) for convert, column in zip(_JSON_COLUMN, columns)]
    return [dict(zip(RECORD_FIELDS, values)) for values in zip(*converted)]


def dumps(payload: Any) -> bytes:
    """Compact UTF-8 JSON, by orjson: a page's body took 0.30 ms with the standard
    library's encoder and 0.03 ms with it (the same bytes), on the event loop of
    every request. A float that is not a number is written as null, never as
    invalid JSON (the renderers pass none: a missing quantity is None already)."""
    return orjson.dumps(payload)


def json_page(rows: Sequence[Sequence[Any]], next_cursor: str | None) -> bytes:
    """The /v1/lineups JSON body of a page's rows as read (`records`): `data`,
    `next_cursor` and its alias `nextCursor` (C4). Why from the rows and not a frame:
    a page is ~100 rows, and per-column pandas work cost ten times the encoding
    (16 ms against 1.5 ms a page, on the event loop of every request)."""
    return dumps({"data": records(rows), "next_cursor": next_cursor, "nextCursor": next_cursor})


def changes_page(items: Sequence[tuple[str, Any]], next_cursor: str, caught_up: bool) -> bytes:
    """The /v1/lineups/changes JSON body (issue 46): `data`, each item `{"op":
    "upsert", "row": {C1 row}}` or `{"op": "delete", "id": …}` in order, `next_cursor`
    (never null; alias `nextCursor`) and `caught_up`. Rows are rendered as a page's
    (`records`), together."""
    rows = iter(records([row for op, row in items if op == "upsert"]))
    data = [{"op": "upsert", "row": next(rows)} if op == "upsert" else {"op": "delete", "id": value} for op, value in items]
    return dumps({"data": data, "next_cursor": next_cursor, "nextCursor": next_cursor, "caught_up": caught_up})


# ---------------------------------------------------------------- CSV
# One CSV writer for the API, share links and the explorer: `store.views.csvtext`.
csv_header = csvtext.csv_header
neutralise = csvtext.neutralise


def csv_of_records(rows: Sequence[Sequence[Any]]) -> bytes:
    """A page's rows as read (`records`) as one CSV document (BOM, header, rows),
    with no frame between, as share links write theirs (`Lineups.csv_blocks`)."""
    return csvtext.csv_header() + csvtext.csv_of_columns(arrow_columns(rows))
