"""The two renderers of lineup rows: JSON and CSV (contract C1, C4, C9).

Both take the same page frame (the rows the query pipeline selected, C1 columns plus
internal ones, which are never written) and neither runs a query. JSON: C1 field
order, times `YYYY-MM-DDTHH:MM:SSZ`, blanks null, `dwt` an integer, `quantity` a
number. CSV: UTF-8 with a byte order mark, RFC 4180 (CRLF, quoting where needed), a
header of the C1 names in C1 order, blanks as empty cells, and text cells that a
spreadsheet would run as a formula prefixed with `'`.

Speed: a column holds few distinct values (ports, companies, statuses), so each is
converted, quoted (by the `csv` module) and JSON-encoded once per distinct value, and
rows are joined from the ready-made cells.
"""

from __future__ import annotations

import csv
import io
import json
import re
from typing import Any, Callable, Iterator

import numpy as np
import pandas as pd

from store.fields import INTEGER_FIELDS, NUMBER_FIELDS, RECORD_FIELDS, TIME_FIELDS

JSON_TYPE = "application/json; charset=UTF-8"
CSV_TYPE = "text/csv; charset=utf-8"
BOM = "\ufeff"
#: C9: first characters that make a spreadsheet evaluate a cell (NUL added: some
#: importers drop it and then see the next character).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\0")
_BLANK_WORDS = frozenset({"", "n/a", "tbc", "tbn"})
#: Text that RFC 4180 (and the csv module with CRLF line ends) writes unquoted.
_PLAIN = re.compile(r'[^,"\r\n]*')
_FORMULA_STARTS = frozenset(FORMULA_STARTS)
#: Rows per chunk of a streamed CSV export.
CHUNK_ROWS = 20_000


# ---------------------------------------------------------------- values
def _time_values(uniques: Any) -> list[str | None]:
    stamps = pd.DatetimeIndex(uniques)
    stamps = stamps.tz_convert("UTC") if stamps.tz is not None else stamps.tz_localize("UTC")
    text = np.datetime_as_string(stamps.tz_localize(None).to_numpy(dtype="datetime64[s]"), unit="s")
    return [t + "Z" for t in text.tolist()]


def _text_value(value: Any) -> str | None:
    """Text with C1 blanks (whitespace, N/A, TBC, TBN) as None."""
    text = value if isinstance(value, str) else str(value)
    return None if text.strip().lower() in _BLANK_WORDS else text


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
        values = [_text_value(v) for v in uniques]
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
    # One join: `+` would copy the whole body once per piece.
    return b"".join((b'{"data":[', b",".join(objects), b'],"next_cursor":', cursor, b',"nextCursor":', cursor, b"}"))


def json_page(frame: pd.DataFrame, next_cursor: str | None) -> bytes:
    """The /v1/lineups JSON body of the rows of `frame`."""
    return json_body(json_objects(frame), next_cursor)


# ---------------------------------------------------------------- CSV
def neutralise(text: str) -> str:
    """C9: a text cell a spreadsheet would evaluate gets a leading `'`."""
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def _number_text(value: float) -> str:
    """The shortest text of a number: 65000 rather than 65000.0."""
    return str(int(value)) if value.is_integer() else repr(value)


class _Quoter:
    """One field as the `csv` module writes it in a row (RFC 4180, minimal quoting)."""

    def __init__(self) -> None:
        self._buffer = io.StringIO()
        self._writer = csv.writer(self._buffer, lineterminator="\r\n", quoting=csv.QUOTE_MINIMAL)

    def __call__(self, text: str) -> str:
        if _PLAIN.fullmatch(text):
            # Nothing to quote (the csv module's own rule); and "" alone in a row
            # would be written "" by the csv module to mark the row.
            return text
        self._buffer.seek(0)
        self._buffer.truncate()
        self._writer.writerow([text])
        return self._buffer.getvalue()[:-2]


def _csv_encoder(field: str, quote: _Quoter) -> Callable[[Any], str]:
    def encode(value: Any) -> str:
        if value is None:
            return ""
        if field in INTEGER_FIELDS:
            return str(value)
        if field in NUMBER_FIELDS:
            return _number_text(value)
        if field in TIME_FIELDS:
            return value
        return quote(neutralise(value))

    return encode


def csv_header() -> bytes:
    """The byte order mark and the header row of C1 names (C9)."""
    quote = _Quoter()
    return (BOM + ",".join(quote(name) for name in RECORD_FIELDS) + "\r\n").encode("utf-8")




class CsvColumns:
    """The CSV cells of a whole result, column by column (C9): for each field the
    encoded text of each distinct value, and each row's code into it. Made once per
    result; `lines` then only joins cells, so a result exported again (a share link
    that a spreadsheet refreshes) costs a join per row, and memory holds codes and
    distinct texts, not the CSV text."""

    def __init__(self, frame: pd.DataFrame):
        quote = _Quoter()
        self._columns = [_csv_column(frame[field], field, quote) for field in RECORD_FIELDS]
        self.rows = len(frame)

    def lines(self, start: int, stop: int) -> list[bytes]:
        """Rows `start` to `stop` as CSV records (CRLF-terminated)."""
        cells = [texts[start:stop] if codes is None else texts[codes[start:stop]] for codes, texts in self._columns]
        # Row by row: most rows are ASCII, which encodes fastest in short strings.
        return [(",".join(row) + "\r\n").encode("utf-8") for row in zip(*(c.tolist() for c in cells))]


def _csv_columns(frame: pd.DataFrame) -> list[list[str]]:
    quote = _Quoter()
    columns = [_csv_column(frame[field], field, quote) for field in RECORD_FIELDS]
    return [(texts if codes is None else texts[codes]).tolist() for codes, texts in columns]


def _csv_column(column: pd.Series, field: str, quote: _Quoter) -> tuple[np.ndarray | None, np.ndarray]:
    """`(codes, texts)`: the CSV cell of row i is `texts[codes[i]]` (code -1: the
    empty last text), or `texts[i]` when `codes` is None. Each distinct value is
    encoded once (`_csv_encoder`), with fast paths that give the same text: times
    formatted in numpy, and text that needs no care (`_csv_text`) taken as it is.
    Row ids are distinct on every row, so they skip the distinct-value step."""
    if field == "id" and column.dtype == object:
        return None, np.array([_csv_text(v, quote) for v in column.tolist()], dtype=object)
    if field in TIME_FIELDS:
        if not isinstance(column.dtype, pd.DatetimeTZDtype):
            column = pd.to_datetime(column, utc=True)
        codes, uniques = pd.factorize(column)
        codes = codes.astype(np.int32)
        stamps = pd.DatetimeIndex(uniques).tz_convert("UTC").tz_localize(None).to_numpy(dtype="datetime64[s]")
        texts = np.char.add(np.datetime_as_string(stamps, unit="s"), "Z").astype(object)
        return codes, np.append(texts, "")
    codes, uniques = pd.factorize(column)
    codes = codes.astype(np.int32)  # kept per result: half the memory of int64
    if field in INTEGER_FIELDS or field in NUMBER_FIELDS:
        values = _values(pd.Series(uniques, dtype=column.dtype), field)[1][:-1]
        encode = _csv_encoder(field, quote)
        texts = [encode(v) for v in values]
    else:
        texts = [_csv_text(v, quote) for v in uniques.tolist()]
    return codes, np.array(texts + [""], dtype=object)


def _csv_text(value: Any, quote: _Quoter) -> str:
    """A text cell (C1 blanks empty, C9 neutralised, RFC 4180 quoted)."""
    if value is None:
        return ""
    text = value if type(value) is str else str(value)
    # Plain text (by far the most) as it is: longer than any blank word, no space at
    # either end (C1 blanks), no formula start (C9), nothing to quote (RFC 4180).
    # Spelled out with `in`: several times faster here than one regular expression.
    if not (
        len(text) <= 5 or text[0].isspace() or text[-1].isspace() or text[0] in _FORMULA_STARTS
        or "," in text or '"' in text or "\n" in text or "\r" in text
    ):
        return text
    text = _text_value(text)
    return "" if text is None else quote(neutralise(text))


def csv_lines(frame: pd.DataFrame) -> list[bytes]:
    """Each row of `frame` as one CSV record (RFC 4180, CRLF-terminated)."""
    return [(",".join(row) + "\r\n").encode("utf-8") for row in zip(*_csv_columns(frame))]


def csv_rows(frame: pd.DataFrame) -> bytes:
    """The rows of `frame` as CSV, without a header."""
    # Row by row: most rows are ASCII, which encodes fastest in short strings.
    return b"".join(csv_lines(frame))


def csv_body(lines: list[bytes]) -> bytes:
    """A whole CSV document from encoded rows: BOM, header, rows."""
    return csv_header() + b"".join(lines)


def csv_page(frame: pd.DataFrame) -> bytes:
    """One page as a whole CSV document: BOM, header, rows."""
    return csv_body(csv_lines(frame))


def csv_chunks(frame: pd.DataFrame, chunk_rows: int = CHUNK_ROWS) -> Iterator[bytes]:
    """A whole result as CSV in pieces: the BOM and header first, then `chunk_rows`
    rows at a time, so that a streamed export never holds the whole text."""
    yield csv_header()
    for start in range(0, len(frame), chunk_rows):
        yield csv_rows(frame.iloc[start:start + chunk_rows])
