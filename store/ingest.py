"""Ingest of feed files (contract C10, C11).

A file (CSV with a header row, or JSON Lines) is read whole, validated column by
column with pandas (fast enough for 1,000,000 rows), and either refused whole with a
report of every bad row (line, field, reason) or upserted by (feed, ref) in the
caller's transaction. A row whose content has not changed keeps its `updated_at`; a
row that changed keeps its previous version in `record_revisions`.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.orm import Session

from store import validate
from store.commodities import mappings as commodity_mappings
from store.errors import ValidationError
from store.feeds import next_version
from store.fields import CONTENT_FIELDS, FEED_FILE_COLUMNS, utcnow
from store.mapping import Mapping
from store.schema import Feed, Record, RecordRevision

#: Rows per database round trip; also the progress bar's step.
CHUNK = 20_000

Progress = Callable[[int], None]


@dataclasses.dataclass
class IngestReport:
    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    unresolved_commodities: int = 0

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


def read_feed_file(path: str | Path, mapping: Mapping | None = None) -> pd.DataFrame:
    """The file as a frame of strings (None for missing), with a `_line` column giving
    each row's line in the file. Raises ValidationError for an unreadable file."""
    path = Path(path)
    suffix = path.suffix.lower()
    try:
        if suffix == ".jsonl" or suffix == ".ndjson":
            frame = _read_jsonl(path)
        elif suffix in (".csv", ".txt"):
            data = path.read_bytes()
            sep = mapping.delimiter if mapping else ","
            encoding = mapping.encoding if mapping else "utf-8-sig"
            frame = _read_csv(data, sep, encoding)
            frame["_line"] = _csv_lines(data, encoding, sep, len(frame))
        else:
            raise ValidationError(f"{path.name}: a feed file ends in .csv or .jsonl")
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise ValidationError(f"Cannot read {path.name}: {exc}") from exc
    frame.columns = [c.strip() if isinstance(c, str) else c for c in frame.columns]
    if mapping is not None:
        lines = frame["_line"]
        frame = mapping.apply(frame.drop(columns="_line"))
        frame["_line"] = lines
    return frame


def _read_csv(data: bytes, sep: str, encoding: str) -> pd.DataFrame:
    """The cells of a CSV file as text, every one kept (empty cells are ""): each
    column but `ref` as a categorical, read by Arrow's multi-threaded parser, so that
    validation (`validate.Distinct`) finds each column's distinct values ready; a feed
    repeats its ports, companies and times on every row. Files that Arrow's parser
    reads differently from pandas' (another encoding, a row with too few or too many
    cells, repeated or empty column names, an empty file) are read by pandas, whose
    behaviour and errors the row-by-row report is built on."""
    arrow = _read_csv_arrow(data, sep) if encoding.lower().replace("_", "-") in ("utf-8", "utf-8-sig", "utf8") else None
    if arrow is not None:
        return arrow
    return pd.read_csv(
        io.BytesIO(data),
        dtype=object,  # plain str objects: pandas string arrays are slower here
        keep_default_na=False,
        na_filter=False,
        sep=sep,
        encoding=encoding,
        skipinitialspace=False,
    )


def _read_csv_arrow(data: bytes, sep: str) -> pd.DataFrame | None:
    """`_read_csv` by Arrow; None when pandas must read the file."""
    first_line = data[: data.find(b"\n") + 1 or len(data)]
    if b'"' in first_line:  # a quoted column name may span lines: pandas reads it
        return None
    header = next(csv.reader(io.StringIO(first_line.decode("utf-8-sig", "replace")), delimiter=sep), None)
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


def _csv_lines(data: bytes, encoding: str, sep: str, rows: int) -> np.ndarray:
    """The line of the file on which each data row starts (the header is line 1).

    pandas skips blank lines and lets a quoted cell span lines, so that row numbers and
    line numbers part ways; then the csv module finds where each record starts. Files
    with neither quotes nor blank lines (most, and every large one we make) skip it."""
    simple = np.arange(2, rows + 2)
    if b'"' not in data and b"\n\n" not in data and b"\n\r\n" not in data:
        return simple
    reader = csv.reader(io.StringIO(data.decode(encoding), newline=""), delimiter=sep)
    starts, consumed = [], 0
    for record in reader:
        if record:
            starts.append(consumed + 1)
        consumed = reader.line_num
    return np.array(starts[1:]) if len(starts) == rows + 1 else simple


def _read_jsonl(path: Path) -> pd.DataFrame:
    rows, lines, errors = [], [], []
    with path.open(encoding="utf-8-sig") as handle:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as exc:
                errors.append({"line": number, "field": None, "reason": f"not JSON: {exc.msg}"})
                continue
            if not isinstance(row, dict):
                errors.append({"line": number, "field": None, "reason": "not a JSON object"})
                continue
            rows.append({k: _jsonl_text(v) for k, v in row.items()})
            lines.append(number)
    if errors:
        raise ValidationError(f"{path.name}: {len(errors)} bad rows; nothing was written", errors)
    frame = pd.DataFrame(rows, dtype=object)
    frame["_line"] = lines
    return frame


def _jsonl_text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def ingest_file(
    session: Session,
    feed: Feed,
    path: str | Path,
    mapping: Mapping | None = None,
    progress: Progress | None = None,
) -> IngestReport:
    """Validate the file and upsert its rows into `feed`.

    Raises ValidationError, whose details list every bad row, and writes nothing when
    any row is bad. Does not commit."""
    frame = read_feed_file(path, mapping)
    clean = validate.validate_frame(frame, name=Path(path).name, **(mapping.parsing() if mapping else {}))
    return upsert(session, feed, clean, progress)


def upsert(
    session: Session, feed: Feed, clean: pd.DataFrame, progress: Progress | None = None
) -> IngestReport:
    """Upsert validated rows (the output of `validate.validate_frame`) by (feed, ref)."""
    now = utcnow().replace(tzinfo=None)
    clean = validate.derive(clean, commodity_mappings(session))
    existing = pd.DataFrame(
        session.execute(
            select(Record.id, Record.ref, Record.content_hash, Record.version).where(
                Record.feed_id == feed.id
            )
        ).all(),
        columns=["id", "ref", "old_hash", "version"],
    )
    joined = clean.merge(existing, on="ref", how="left")
    is_new = joined["id"].isna().to_numpy()
    changed = ~is_new & (joined["old_hash"] != joined["content_hash"]).to_numpy()
    report = IngestReport(
        inserted=int(is_new.sum()),
        updated=int(changed.sum()),
        unchanged=int((~is_new & ~changed).sum()),
        unresolved_commodities=int((joined["commodity"].notna() & joined["commodity_leaf"].isna()).sum()),
    )
    joined["updated_at"] = joined["updated_at"].fillna(pd.Timestamp(now, tz="UTC"))
    if report.inserted or report.updated:
        version = next_version(session, feed.id)
        _insert_new(session, feed, joined[is_new], now, version, progress)
        _update_changed(session, joined[changed], now, version, progress)
    return report


_STORED = (*CONTENT_FIELDS, "vessel_key", "commodity_raw_key", "commodity_leaf", "content_hash")


def _python_values(column: pd.Series, sqlite: bool) -> list:
    """A column as Python values for a DB-API driver: None for missing, naive UTC
    datetimes (ISO text for SQLite, as SQLAlchemy stores them), Python numbers."""
    if isinstance(column.dtype, pd.DatetimeTZDtype):
        return _python_times(column, sqlite)
    if isinstance(column.dtype, pd.CategoricalDtype):  # text from validate_frame and derive
        values = column.cat.categories.to_numpy(dtype=object)
        return np.append(values, None)[column.cat.codes.to_numpy()].tolist()
    missing = column.isna().to_numpy()
    if column.dtype == object:
        if not missing.any():
            return column.tolist()
        values = column.to_numpy(dtype=object, copy=True)
    else:
        values = np.array(column.tolist(), dtype=object)
    values[missing] = None
    return values.tolist()


def _python_times(column: pd.Series, sqlite: bool) -> list:
    """Each distinct time converted once: a feed repeats its times over many rows."""
    codes, uniques = pd.factorize(column, use_na_sentinel=True)
    naive = uniques.tz_convert(None).as_unit("us").to_numpy()
    if not len(naive):
        return [None] * len(codes)
    if sqlite:  # numpy formats in C; SQLAlchemy's SQLite layout has a space, not "T"
        values = np.char.replace(np.datetime_as_string(naive, unit="us"), "T", " ").astype(object)
    else:
        values = np.array(naive.tolist(), dtype=object)
    return np.append(values, None)[codes].tolist()


def _rows(frame: pd.DataFrame, columns: list[str], sqlite: bool) -> Iterator[tuple]:
    return zip(*(_python_values(frame[c], sqlite) for c in columns))


def _insert_new(session, feed, frame, now, version, progress) -> None:
    """Insert new records with one executemany per chunk. A driver-level statement
    (not the ORM) is what gets ingest past 50,000 rows/s on SQLite."""
    if frame.empty:
        return
    connection = session.connection()
    sqlite = connection.dialect.name == "sqlite"
    columns = ["ref", *_STORED, "updated_at"]
    frame = frame.assign(feed_id=feed.id, version=1, changed_version=version, created_at=pd.Timestamp(now, tz="UTC"))
    columns += ["feed_id", "version", "changed_version", "created_at"]
    mark = "?" if sqlite else "%s"
    statement = (
        f"INSERT INTO {Record.__tablename__} ({', '.join(columns)}) "
        f"VALUES ({', '.join([mark] * len(columns))})"
    )
    # The driver's own cursor, in the session's transaction: it takes the rows as an
    # iterator, with no list of tuples built first and no per-row checks. The next
    # chunk's Python values are made on a helper thread while the driver writes this
    # one (sqlite3 and psycopg release the GIL while the database works).
    def values(start: int) -> list[list]:
        chunk = frame.iloc[start : start + CHUNK]
        return [_python_values(chunk[c], sqlite) for c in columns]

    starts = range(0, len(frame), CHUNK)
    cursor = connection.connection.cursor()
    try:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ingest") as helper:
            pending = helper.submit(values, starts[0])
            for following in [*starts[1:], None]:
                chunk = pending.result()
                if following is not None:
                    pending = helper.submit(values, following)
                cursor.executemany(statement, zip(*chunk))
                if progress:
                    progress(len(chunk[0]))
    finally:
        cursor.close()


def _records(frame: pd.DataFrame) -> list[dict]:
    """Rows as dicts for SQLAlchemy's executemany (updates)."""
    columns = ["ref", *_STORED, "updated_at"]
    return [dict(zip(columns, row)) for row in _rows(frame, columns, sqlite=False)]


def _update_changed(session, frame, now, version, progress) -> None:
    if frame.empty:
        return
    connection = session.connection()
    for start in range(0, len(frame), CHUNK):
        part = frame.iloc[start : start + CHUNK]
        ids = [int(i) for i in part["id"]]
        old = {row.id: row for row in session.execute(select(Record).where(Record.id.in_(ids))).scalars()}
        connection.execute(
            insert(RecordRevision),
            [
                {
                    "record_id": rid,
                    "version": old[rid].version,
                    "content": validate.content_json(old[rid]),
                    "updated_at": old[rid].updated_at,
                    "replaced_at": now,
                }
                for rid in ids
            ],
        )
        rows = _records(part)
        for rid, row in zip(ids, rows):
            row.pop("ref")
            row.update(b_id=rid, version=old[rid].version + 1, changed_version=version)
        statement = (
            update(Record.__table__)
            .where(Record.__table__.c.id == bindparam("b_id"))
            .values({name: bindparam(name) for name in (*_STORED, "updated_at", "version", "changed_version")})
        )
        connection.execute(statement, rows)
        session.expire_all()
        if progress:
            progress(len(rows))
