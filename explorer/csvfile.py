"""The explorer's CSV download: the whole filtered result as one C9 document.

UTF-8 with a byte order mark, RFC 4180 (CRLF, quoting where needed), the C1 header,
times `YYYY-MM-DDTHH:MM:SSZ`, blanks as empty cells, numbers in their shortest text
(65000, not 65000.0), and text cells that a spreadsheet would run as a formula with
a leading `'`. This is the same text the API writes for the same rows (the explorer
may not import `api/`); the writer belongs in `store/` for both to share.
"""

from __future__ import annotations

import csv
import io

import pandas as pd

from store.fields import INTEGER_FIELDS, NUMBER_FIELDS, RECORD_FIELDS, TIME_FIELDS, is_blank

BOM = "\ufeff"
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
#: C9: first characters that make a spreadsheet evaluate a cell (NUL: some importers
#: drop it and then see the next character).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\0")


def neutralise(text: str) -> str:
    """C9: a text cell a spreadsheet would evaluate gets a leading `'`."""
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def _time_cells(column: pd.Series) -> list[str]:
    times = pd.to_datetime(column, utc=True)
    text = times.dt.strftime(TIME_FORMAT)
    return ["" if pd.isna(t) else s for t, s in zip(times, text)]


def _number_text(value) -> str:
    if is_blank(value) or pd.isna(value):
        return ""
    value = float(value)
    return str(int(value)) if value.is_integer() else repr(value)


def _text(value) -> str:
    return "" if is_blank(value) else neutralise(str(value).strip())


def _column(frame: pd.DataFrame, field: str) -> list[str]:
    column = frame[field]
    if field in TIME_FIELDS:
        return _time_cells(column)
    if field in INTEGER_FIELDS or field in NUMBER_FIELDS:
        return [_number_text(v) for v in column.astype(object)]
    return [_text(v) for v in column.astype(object)]


def csv_bytes(frame: pd.DataFrame) -> bytes:
    """`frame`'s rows (C1 columns, any others ignored) as a CSV document."""
    buffer = io.StringIO()
    buffer.write(BOM)
    writer = csv.writer(buffer, lineterminator="\r\n", quoting=csv.QUOTE_MINIMAL)
    writer.writerow(RECORD_FIELDS)
    writer.writerows(zip(*(_column(frame, field) for field in RECORD_FIELDS)))
    return buffer.getvalue().encode("utf-8")
