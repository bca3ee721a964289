"""Reading feed files (contract C10, C11): a CSV or JSON Lines file as a frame of text.

`read_feed_file` gives every cell as the text in the file, with a `_line` column (the
file's own line of each row) for the row-by-row report of `store.intake.validate`. What a
file cannot be read as is refused here, in one line that says why and what fixes it:

- a file that is not text (a binary named `.csv`): VALIDATION_ERROR, no traceback;
- CSV: the delimiter (`,` `;` tab `|`) is the one the header row uses most, and the
  encoding is UTF-8 (a BOM allowed), UTF-16 with a BOM, else Windows-1252 (the
  Latin-1 of spreadsheets on Western European machines), unless a `--mapping` names
  them; what was detected is in `frame.attrs["read_as"]`, for the command line to
  say. An encoding that a mapping names and the file does not fit names the line;
- an empty file (nothing but white space) says so;
- a CSV row with more cells than the header is a bad row ("has 11 cells, the header
  has 9"), never shifted onto other fields by the parser; the file's other rows are
  still read. A row with fewer cells is read with the missing cells empty
  (spreadsheets drop trailing empty cells);
- JSON Lines: a line that is not a JSON object, an unknown key, and a value that is an
  object or an array are bad rows with their line and field; the file's other rows
  are still read.

Bad rows travel in `frame.attrs["problems"]`, so that `store.intake.validate` reports
them with every other bad row of the file in one pass (C10).
"""

from __future__ import annotations

import codecs
import csv
import io
import json
from pathlib import Path

import numpy as np
from store.frames import pd
import pyarrow as pa
import pyarrow.csv as pa_csv

from store.errors import ValidationError
from store.fields import FEED_FILE_COLUMNS
from store.intake.mapping import Mapping

#: Candidate CSV delimiters, the default first (it wins a tie).
DELIMITERS = (",", ";", "\t", "|")
#: The encoding of text that is not UTF-8: Windows-1252 is Latin-1 with printable
#: characters (€, –, “”) where Latin-1 has control codes.
FALLBACK_ENCODING = "cp1252"
#: Bytes of the file's start looked at to tell text from binary data.
SAMPLE = 8192
#: Control characters (not tab, CR, LF, form feed, escape) that text does not contain.
_CONTROL = bytes(b for b in range(32) if b not in (9, 10, 12, 13, 27))
_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
_DECODE_CHUNK = 1 << 24
_NAMES = {"utf-8-sig": "UTF-8", "cp1252": "Windows-1252", "latin-1": "Latin-1", "utf-16": "UTF-16"}
_DELIMITER_NAMES = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}
MAPPING_HELP = "docs/operators.md, section 6"


def read_feed_file(path: str | Path, mapping: Mapping | None = None) -> pd.DataFrame:
    """The file as a frame of strings (None for missing), with a `_line` column giving
    each row's line in the file; `attrs["read_as"]` says which encoding and delimiter
    were used (and which of them the mapping named), and `attrs["problems"]` holds JSON
    Lines rows that could not be read.
    Raises ValidationError for a file that cannot be read as a feed file."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".txt", ".jsonl", ".ndjson"):
        raise ValidationError(f"{path.name}: a feed file ends in .csv or .jsonl")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ValidationError(f"Cannot read {path.name}: {exc.strerror or exc}") from exc
    _check_text(data, path.name)
    data, encoding = _as_utf8(data, path.name, mapping.encoding if mapping else None)
    if not data.removeprefix(codecs.BOM_UTF8).strip():
        raise ValidationError(
            f"{path.name}: the file is empty; a feed file has a header row (CSV) or one JSON object a line"
        )
    if suffix in (".jsonl", ".ndjson"):
        frame = _read_jsonl(data)
        delimiter = None
    else:
        delimiter = (mapping.delimiter if mapping else None) or _delimiter(data)
        frame = _read_csv_file(data, delimiter, path.name)
    frame.columns = [c.strip() if isinstance(c, str) else c for c in frame.columns]
    problems = frame.attrs.get("problems", [])
    if mapping is not None:
        lines = frame["_line"]
        frame = mapping.apply(frame.drop(columns="_line"))
        frame["_line"] = lines
    named = {key for key in ("encoding", "delimiter") if mapping is not None and getattr(mapping, key)}
    frame.attrs["read_as"] = {"encoding": encoding, "delimiter": delimiter, "named": sorted(named)}
    frame.attrs["problems"] = problems
    return frame


def describe(read_as: dict) -> str | None:
    """A line saying how a file was read, when that was not the plain format (UTF-8,
    comma-separated) and not what a mapping named (`read_as["named"]`); None otherwise."""
    named = read_as.get("named", ())
    encoding = None if "encoding" in named else read_as.get("encoding")
    delimiter = None if "delimiter" in named else read_as.get("delimiter")
    unusual = []
    if delimiter not in (None, ","):
        unusual.append(f"{_DELIMITER_NAMES.get(delimiter, repr(delimiter))}-separated")
    if encoding not in (None, "utf-8-sig", "utf-8"):
        unusual.append(f"{_NAMES.get(encoding, encoding)} text")
    if not unusual:
        return None
    return f"Read as {' '.join(unusual)} (a --mapping file with `delimiter` and `encoding` reads it otherwise)"


def _check_text(data: bytes, name: str) -> None:
    sample = data[:SAMPLE]
    if sample.startswith(_UTF16_BOMS):
        return
    controls = sum(sample.count(bytes([b])) for b in _CONTROL)
    if controls > max(2, len(sample) // 200):
        raise ValidationError(
            f"{name} is not a text file (it holds binary data): a feed file is CSV text or JSON Lines"
        )


def _as_utf8(data: bytes, name: str, wanted: str | None) -> tuple[bytes, str]:
    """The file's bytes as UTF-8 and the encoding they were read in: `wanted` (a
    mapping's `encoding`), else UTF-8, UTF-16 with a BOM, or Windows-1252. UTF-8 files,
    the common case, are checked in chunks and passed on as they are."""
    if wanted is None:
        if data.startswith(_UTF16_BOMS):
            return _recode(data, "utf-16", name), "utf-16"
        if _first_bad_utf8(data) is None:
            return data, "utf-8-sig"
        try:
            return data.decode(FALLBACK_ENCODING).encode("utf-8"), FALLBACK_ENCODING
        except UnicodeDecodeError:  # the five bytes Windows-1252 leaves undefined
            return data.decode("latin-1").encode("utf-8"), "latin-1"
    try:
        codecs.lookup(wanted)
    except LookupError:
        raise ValidationError(f"The mapping names an unknown encoding {wanted!r}") from None
    if codecs.lookup(wanted).name in ("utf-8", "utf-8-sig"):
        bad = _first_bad_utf8(data)
        if bad is not None:
            raise _not_encoded(data, bad, name, wanted)
        return data, "utf-8-sig"
    return _recode(data, wanted, name), wanted


def _recode(data: bytes, encoding: str, name: str) -> bytes:
    try:
        return data.decode(encoding).encode("utf-8")
    except UnicodeDecodeError as exc:
        raise _not_encoded(data, exc.start, name, encoding) from None


def _first_bad_utf8(data: bytes) -> int | None:
    """The offset of the first byte that is not UTF-8, or None (decoded in chunks, so
    that a large file is never held twice)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(data)
    for start in range(0, max(len(data), 1), _DECODE_CHUNK):
        pending = len(decoder.getstate()[0])  # bytes of a character cut by the last chunk
        try:
            decoder.decode(view[start : start + _DECODE_CHUNK], final=start + _DECODE_CHUNK >= len(data))
        except UnicodeDecodeError as exc:
            return start - pending + exc.start
    return None


def _not_encoded(data: bytes, offset: int, name: str, encoding: str) -> ValidationError:
    line = data.count(b"\n", 0, max(offset, 0)) + 1
    return ValidationError(
        f"{name}: line {line} is not {encoding} text (byte 0x{data[offset]:02x}); set `encoding` in the "
        f"mapping to the file's encoding (cp1252 for most Western European spreadsheets)"
    )


def _delimiter(data: bytes) -> str:
    """The delimiter the header row uses most (a comma on a tie or when there is none)."""
    end = data.find(b"\n")
    header = data[: end if end >= 0 else len(data)]
    counts = [header.count(d.encode()) for d in DELIMITERS]
    return DELIMITERS[int(np.argmax(counts))] if max(counts) else ","


def _read_csv_file(data: bytes, sep: str, name: str) -> pd.DataFrame:
    try:
        frame, ragged = _read_csv_arrow(data, sep), []
        if frame is None:  # an unusual file: checked row by row, then read by pandas
            ragged = _ragged_rows(data, sep)
            kept, lines = _without_records(data, sep, {problem["line"] for problem in ragged})
            frame = _read_csv_pandas(kept, sep)
            frame["_line"] = lines[_csv_lines(kept, sep, len(frame)) - 1]
        else:
            frame["_line"] = _csv_lines(data, sep, len(frame))
    except (csv.Error, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ValidationError(f"Cannot read {name}: {' '.join(str(exc).split())}") from exc
    frame.attrs["problems"] = ragged
    return frame


def _read_csv_pandas(data: bytes, sep: str) -> pd.DataFrame:
    """The cells of a CSV file as text, every one kept (empty cells are ""), as
    pandas reads them: files that Arrow's parser reads differently (a row with too few
    cells, repeated or empty column names). Rows with more cells than the header were
    taken out before (`_without_records`)."""
    return pd.read_csv(
        io.BytesIO(data),
        dtype=object,  # plain str objects: pandas string arrays are slower here
        keep_default_na=False,
        na_filter=False,
        sep=sep,
        encoding="utf-8-sig",
        skipinitialspace=False,
        index_col=False,  # never an index
    )


def _read_csv_arrow(data: bytes, sep: str) -> pd.DataFrame | None:
    """The cells as `_read_csv_pandas` gives them, each column but `ref` as a
    categorical, read by Arrow's multi-threaded parser, so that validation
    (`validate.Distinct`) finds each column's distinct values ready; a feed repeats its
    ports, companies and times on every row. None when pandas must read the file."""
    first_line = data[: data.find(b"\n") + 1 or len(data)]
    if b'"' in first_line:  # a quoted column name may span lines: pandas reads it
        return None
    header = next(csv.reader(io.StringIO(first_line.decode("utf-8-sig"), newline=""), delimiter=sep), None)
    header = [cell.rstrip("\r\n") for cell in header or []]
    if not header or len(set(header)) != len(header) or any(not name for name in header):
        return None
    text = {name: pa.string() if name.strip() == "ref" else pa.dictionary(pa.int32(), pa.string()) for name in header}
    try:
        table = pa_csv.read_csv(
            io.BytesIO(data),
            read_options=pa_csv.ReadOptions(column_names=header, skip_rows=1),
            parse_options=pa_csv.ParseOptions(delimiter=sep, newlines_in_values=b'"' in data),
            convert_options=pa_csv.ConvertOptions(column_types=text, strings_can_be_null=False, null_values=[]),
        )
    except (pa.ArrowInvalid, UnicodeDecodeError):
        return None
    frame = table.to_pandas()
    return frame.astype({name: object for name in header if not isinstance(frame[name].dtype, pd.CategoricalDtype)})


def _records(data: bytes, sep: str):
    """(line where the record starts, record) for each non-empty CSV record."""
    reader = csv.reader(io.StringIO(data.decode("utf-8-sig"), newline=""), delimiter=sep)
    consumed = 0
    for record in reader:
        if record:
            yield consumed + 1, record
        consumed = reader.line_num


def _ragged_rows(data: bytes, sep: str) -> list[dict]:
    """A problem (line, no field, reason) for every row with more cells than the header."""
    records = _records(data, sep)
    header = next(records, (1, []))[1]
    return [
        {"line": line, "field": None, "reason": f"has {len(record)} cells, the header has {len(header)}"}
        for line, record in records
        if len(record) > len(header)
    ]


def _without_records(data: bytes, sep: str, starts: set[int]) -> tuple[bytes, np.ndarray]:
    """The file without the records that begin on the lines `starts` (each up to where
    the next record begins: a quoted cell may span lines), and for each line of what
    is left the line of the file it was."""
    lines = np.arange(1, data.count(b"\n") + 2)
    if not starts:
        return data, lines
    records = [line for line, _ in _records(data, sep)] + [len(lines) + 1]
    gone = np.zeros(len(lines) + 1, dtype=bool)
    for start, following in zip(records, records[1:]):
        if start in starts:
            gone[start:following] = True
    keep = ~gone[1:]
    text = data.split(b"\n")
    return b"\n".join(line for line, kept in zip(text, keep) if kept), lines[keep]


def _csv_lines(data: bytes, sep: str, rows: int) -> np.ndarray:
    """The line of the file on which each data row starts (the header is line 1).

    pandas skips blank lines and lets a quoted cell span lines, so that row numbers and
    line numbers part ways; then the csv module finds where each record starts. Files
    with neither quotes nor blank lines (most, and every large one we make) skip it."""
    simple = np.arange(2, rows + 2)
    if b'"' not in data and b"\n\n" not in data and b"\n\r\n" not in data:
        return simple
    starts = [line for line, _ in _records(data, sep)]
    return np.array(starts[1:]) if len(starts) == rows + 1 else simple


def _read_jsonl(data: bytes) -> pd.DataFrame:
    rows, lines, problems = [], [], []
    for number, text in enumerate(data.decode("utf-8-sig").split("\n"), start=1):
        if not text.strip():
            continue
        try:
            row = json.loads(text)
        except json.JSONDecodeError as exc:
            problems.append({"line": number, "field": None, "reason": f"is not JSON ({exc.msg} at column {exc.colno})"})
            continue
        if not isinstance(row, dict):
            problems.append({"line": number, "field": None, "reason": "is not a JSON object"})
            continue
        rows.append(_jsonl_row(row, number, problems))
        lines.append(number)
    frame = pd.DataFrame(rows, dtype=object)
    frame["_line"] = lines
    frame.attrs["problems"] = problems
    return frame


def _jsonl_row(row: dict, line: int, problems: list[dict]) -> dict[str, str | None]:
    """A JSON object's feed fields as text; an unknown key or a value that is no plain
    value is a problem of its line (and left out, so that it is reported once)."""
    out = {}
    for key, value in row.items():
        if key not in FEED_FILE_COLUMNS:
            problems.append({"line": line, "field": key, "reason": "unknown column"})
        elif isinstance(value, (dict, list)):
            kind = "object" if isinstance(value, dict) else "array"
            problems.append({"line": line, "field": key, "reason": f"is a JSON {kind}, not a value"})
        else:
            out[key] = _jsonl_text(value)
    return out


def _jsonl_text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)
