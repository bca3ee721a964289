"""The CSV text of lineup rows (contract C1, C9): the one writer behind the API's CSV
pages, share links and the explorer's download.

UTF-8 with a byte order mark, RFC 4180 (CRLF line ends, minimal quoting), a header of
the C1 names in C1 order, times `YYYY-MM-DDTHH:MM:SSZ`, numbers in their shortest text
(65000, not 65000.0), blanks (C1) as empty cells, and text cells that a spreadsheet
would run as a formula (first character `=`, `+`, `-`, `@`, tab, CR or NUL) written
with a leading `'`.

Its input is the rows as the views keep them, as Arrow columns
(`store.views.stored.arrow_columns` of the rows read), written straight to CSV
(`csv_of_columns`), with no frame between.

How: rows are written a block at a time (`Lineups.csv_blocks`), column by column, in Arrow. Each column of a
block is dictionary-encoded; the text of each distinct value is decided once, by the
per-value rules below (`_csv_text`, `_number_text`), except where a vectorised test
proves the rules leave the value as it is (plain text, integers); the cells are then
taken from the encoded values and joined into lines in Arrow's C++ kernels, which
release the GIL, so a server thread writing CSV leaves the event loop free. The
block's lines are one contiguous UTF-8 buffer: the CSV text itself, without a copy
per row.
"""

from __future__ import annotations

import csv
import io
import re
from typing import Any, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from store.fields import INTEGER_FIELDS, NUMBER_FIELDS, RECORD_FIELDS, TIME_FIELDS, text_value

CSV_TYPE = "text/csv; charset=utf-8"
BOM = "\ufeff"
#: C9: first characters that make a spreadsheet evaluate a cell (NUL added: some
#: importers drop it and then see the next character).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\0")
LINE_END = "\r\n"
#: Text that RFC 4180 (and the csv module with CRLF line ends) writes unquoted.
_PLAIN = re.compile(r'[^,"\r\n]*')
_FORMULA_STARTS = frozenset(FORMULA_STARTS)
#: Floats below this size that are whole numbers are written as integers, exactly.
_EXACT_INTEGERS = 2.0**53


# ---------------------------------------------------------------- values
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
        self._writer = csv.writer(self._buffer, lineterminator=LINE_END, quoting=csv.QUOTE_MINIMAL)

    def __call__(self, text: str) -> str:
        if _PLAIN.fullmatch(text):
            # Nothing to quote (the csv module's own rule); and "" alone in a row
            # would be written "" by the csv module to mark the row.
            return text
        self._buffer.seek(0)
        self._buffer.truncate()
        self._writer.writerow([text])
        return self._buffer.getvalue()[: -len(LINE_END)]


def _csv_text(value: Any, quote: _Quoter) -> str:
    """A text cell (C1 blanks empty, C9 neutralised, RFC 4180 quoted)."""
    if value is None:
        return ""
    text = value if type(value) is str else str(value)
    text = text_value(text)
    return "" if text is None else quote(neutralise(text))


def csv_header() -> bytes:
    """The byte order mark and the header row of C1 names (C9)."""
    quote = _Quoter()
    return (BOM + ",".join(quote(name) for name in RECORD_FIELDS) + LINE_END).encode("utf-8")


# ---------------------------------------------------------------- columns
#: Text columns whose values are new strings on (nearly) every row: the feed lists
#: of merged rows and row ids. Their cells are checked row by row in Arrow; grouping
#: them first (hashing long strings in Python) costs more than it saves.
_ROW_TEXT = frozenset({"id", "source_id", "source_name"})
#: Bytes that may start a plain text (ASCII letters and digits: no space, no C9
#: formula start) and end one (printable ASCII other than space).
_PLAIN_FIRST = np.zeros(256, bool)
_PLAIN_FIRST[[*range(48, 58), *range(65, 91), *range(97, 123)]] = True
_PLAIN_LAST = np.zeros(256, bool)
_PLAIN_LAST[33:127] = True
_NEEDS_QUOTES = (b",", b'"', b"\r", b"\n")

#: A column's cells: `texts[codes[i]]` for row i (code -1: the empty cell), or
#: `texts[i]` when codes is None.
Cells = tuple["np.ndarray | None", pa.Array]


def _plain(texts: pa.Array) -> np.ndarray:
    """Which of `texts` every rule leaves as they are (`_csv_text`): at least four
    bytes (no C1 blank word), an ASCII letter or digit first (no space, no C9 formula
    start), printable ASCII last (no space), nothing to quote (RFC 4180). Nulls are
    not plain. Vectorised over the Arrow buffers."""
    count = len(texts)
    offsets = np.frombuffer(texts.buffers()[1], np.int32, count + 1, 4 * texts.offset)
    data_buffer = texts.buffers()[2]
    if data_buffer is None or offsets[-1] == offsets[0]:
        return np.zeros(count, bool)
    data = np.frombuffer(data_buffer, np.uint8)
    starts, ends = offsets[:-1], offsets[1:]
    plain = (ends - starts >= 4) & _PLAIN_FIRST[data[np.minimum(starts, len(data) - 1)]]
    plain &= _PLAIN_LAST[data[np.maximum(ends - 1, 0)]]
    raw = data_buffer[int(offsets[0]): int(offsets[-1])].to_pybytes()
    if any(special in raw for special in _NEEDS_QUOTES):
        marks = np.isin(data[offsets[0]: offsets[-1]], np.frombuffer(b"".join(_NEEDS_QUOTES), np.uint8))
        where = np.flatnonzero(marks) + offsets[0]
        plain[np.searchsorted(offsets, where, side="right") - 1] = False
    return plain


def _encoded_texts(texts: pa.Array, quote: _Quoter) -> pa.Array:
    """`texts` with each value that is not plain (nulls too) replaced by its
    `_csv_text`."""
    careful = ~_plain(texts)
    if not careful.any():
        return texts
    chosen = texts.filter(pa.array(careful)).to_pylist()
    return pc.replace_with_mask(texts, pa.array(careful), pa.array([_csv_text(v, quote) for v in chosen], pa.string()))


def _stamps(seconds: np.ndarray) -> pa.Array:
    """datetime64[s] values (UTC) as their C1 text."""
    return pa.array(np.char.add(np.datetime_as_string(seconds, unit="s"), "Z"), pa.string())


def _float_texts(values: np.ndarray) -> pa.Array:
    """Floats (none missing) as their cell text: whole ones as integers, in Arrow,
    the others as `_number_text` writes them."""
    whole = np.isfinite(values) & (np.abs(values) < _EXACT_INTEGERS) & (np.floor(values) == values)
    texts = pc.cast(pa.array(np.where(whole, values, 0).astype(np.int64)), pa.string())
    if whole.all():
        return texts
    rest = pa.array([_number_text(v) for v in values[~whole].tolist()], pa.string())
    return pc.replace_with_mask(texts, pa.array(~whole), rest)


def _stored_cells(values: pa.Array, field: str, quote: _Quoter) -> Cells:
    """The cells of a column as the view keeps it (`store.views.stored.arrow_columns`:
    times as int64 nanoseconds, blanks null), in Arrow: each distinct value's text
    decided once (row texts: each row's)."""
    if field in _ROW_TEXT:
        return None, _encoded_texts(values, quote)
    encoded = values.dictionary_encode()
    codes, uniques = encoded.indices.fill_null(-1).to_numpy(), encoded.dictionary
    if field in TIME_FIELDS:
        return codes, _stamps(uniques.to_numpy().astype("datetime64[ns]").astype("datetime64[s]"))
    if field in INTEGER_FIELDS:
        return codes, pc.cast(uniques, pa.string())
    if field in NUMBER_FIELDS:
        return codes, _float_texts(uniques.to_numpy())
    return codes, _encoded_texts(uniques, quote)


def _joined(columns: list[Cells], rows: int) -> pa.Array:
    """The cells of `rows` rows, given by column (C1 order), in row order, each
    followed by its separator (a comma, CRLF after the last): the data of this string
    array is the CSV text.

    One Arrow `take` writes it: the encoded texts of all columns, each with its
    separator and an empty cell appended, are one array; row i, column j is the
    entry at the column's base plus its code."""
    width = len(RECORD_FIELDS)
    pieces: list[pa.Array] = []
    index = np.empty((rows, width), np.int32)
    base = 0
    for j, (codes, texts) in enumerate(columns):
        separator = LINE_END if j == width - 1 else ","
        pieces += [pc.binary_join_element_wise(texts, separator, ""), pa.array([separator], pa.string())]
        if codes is None:
            index[:, j] = np.arange(base, base + rows, dtype=np.int32)
        else:
            index[:, j] = np.where(codes < 0, base + len(texts), codes + base)
        base += len(texts) + 1
    return pa.concat_arrays(pieces).take(pa.array(index.ravel()))


def _text(cells: pa.Array) -> bytes:
    """The UTF-8 text of `cells` end to end: the data between its first and last
    offsets."""
    if len(cells) == 0:
        return b""
    offsets = np.frombuffer(cells.buffers()[1], np.int32, len(cells) + 1, 4 * cells.offset)
    return cells.buffers()[2][int(offsets[0]): int(offsets[-1])].to_pybytes()


# ---------------------------------------------------------------- documents
def csv_of_columns(columns: Mapping[str, pa.Array]) -> bytes:
    """C1 columns as the view keeps them (`store.views.stored.arrow_columns`) as CSV
    text without a header: a share link's export block, an API CSV page, the
    explorer's download (63,561 rows read: a pandas frame of them and its CSV took
    0.73 s of CPU, the Arrow columns and their CSV 0.28 s, 2026-11-29)."""
    rows = len(columns[RECORD_FIELDS[0]])
    if not rows:
        return b""
    quote = _Quoter()
    return _text(_joined([_stored_cells(columns[field], field, quote) for field in RECORD_FIELDS], rows))
