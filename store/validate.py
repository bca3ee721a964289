"""Row validation of feed files (contract C1, C11), column by column.

`validate_frame` checks a frame of strings and returns typed, cleaned columns, or
raises one ValidationError whose `details` list every bad row as
`{"line", "field", "reason"}`. `derive` adds what the store keeps beside the raw
values: vessel key, commodity resolution, port and country names from the
directory, and a content hash that tells a changed row from an unchanged one.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any, Mapping

import numpy as np
import pandas as pd

from store.errors import ValidationError
from store.fields import (
    CONTENT_FIELDS,
    DATE_FIELDS,
    ENUMERATIONS,
    FEED_FILE_COLUMNS,
    canonical_enum,
    format_time,
)
from store.normalize import commodity_text_key, lookup_key, vessel_name_key
from store.ports import default_directory, looks_like_unlocode
from store.schema import Record
from store.taxonomy import default_taxonomy

_IMO_PREFIX = re.compile(r"^\s*IMO[\s:]*", re.IGNORECASE)
_BLANK_WORDS = frozenset({"", "n/a", "tbc", "tbn"})
#: Free-text columns and the longest value their store column holds (PostgreSQL
#: refuses longer ones, so a long value is a bad row, not a failed transaction).
_TEXT_LIMITS = {
    f: Record.__table__.c[f].type.length
    for f in ("ref", *CONTENT_FIELDS)
    if f not in (*DATE_FIELDS, "dwt", "quantity", *ENUMERATIONS, "vessel_imo", "port_unlocode")
}


class _Problems:
    """Collects bad rows; raises them all at once."""

    def __init__(self, lines: pd.Series):
        self.lines = lines
        self.items: list[dict[str, Any]] = []

    def add(self, mask: pd.Series | np.ndarray, field: str | None, reason) -> None:
        mask = np.asarray(mask, dtype=bool)
        if not mask.any():
            return
        for position in np.flatnonzero(mask):
            text = reason(position) if callable(reason) else reason
            self.items.append({"line": int(self.lines.iloc[position]), "field": field, "reason": text})

    def raise_if_any(self, name: str) -> None:
        if self.items:
            self.items.sort(key=lambda item: (item["line"], item["field"] or ""))
            bad_lines = len({item["line"] for item in self.items})
            raise ValidationError(
                f"{name}: {bad_lines} bad row(s), {len(self.items)} problem(s); "
                "the file was refused whole and nothing was written",
                self.items,
            )


def map_unique(column: pd.Series, function) -> pd.Series:
    """`function` applied once per distinct non-missing value of `column`; missing
    values stay None. Feed columns repeat a few values (ports, companies,
    enumerations) over many rows, so this is what keeps ingest fast."""
    # Plain object arrays: pandas' string arrays factorize and iterate far slower.
    codes, uniques = pd.factorize(column.to_numpy(dtype=object), use_na_sentinel=True)
    values = np.empty(len(uniques) + 1, dtype=object)
    values[:-1] = [function(u) for u in uniques.tolist()]
    values[-1] = None  # code -1: missing
    return pd.Series(values[codes], index=column.index, dtype=object)


def _clean_text(value: object) -> str | None:
    text = str(value).strip()
    return None if text.lower() in _BLANK_WORDS else text


def _blank_to_na(column: pd.Series) -> pd.Series:
    return map_unique(column, _clean_text)


def validate_frame(frame: pd.DataFrame, date_format=None, name: str = "file", timezone: str | None = None) -> pd.DataFrame:
    """Typed, cleaned rows of a feed file (`date_format`: a strptime format or a list
    of them, tried in order; default ISO 8601). Raises ValidationError listing every bad
    row (line, field, reason); the `_line` column gives file lines."""
    lines = frame["_line"]
    problems = _Problems(lines)
    unknown = [c for c in frame.columns if c != "_line" and c not in FEED_FILE_COLUMNS]
    for column in unknown:
        problems.items.append({"line": 1, "field": column, "reason": "unknown column"})
    for required in ("ref", "port_unlocode"):
        if required not in frame.columns:
            problems.items.append({"line": 1, "field": required, "reason": "required column is missing"})
    if "vessel_imo" not in frame.columns and "vessel_name" not in frame.columns:
        problems.items.append(
            {"line": 1, "field": "vessel_imo", "reason": "a vessel_imo or vessel_name column is required"}
        )
    # Without a required column the rows cannot be checked; unknown columns are
    # reported together with the rows' problems, so that one run shows them all.
    if len(problems.items) > len(unknown):
        problems.raise_if_any(name)

    out = pd.DataFrame({"_line": lines.to_numpy()}, index=frame.index)
    for column in FEED_FILE_COLUMNS:
        out[column] = _blank_to_na(frame[column]) if column in frame.columns else None

    _check_lengths(out, problems)
    _check_characters(out, problems)
    _check_ref(out, problems)
    _check_port(out, problems)
    _check_vessel(out, problems)
    for column in (*DATE_FIELDS, "updated_at"):
        feed_dates = column in DATE_FIELDS
        out[column] = _parse_dates(
            out[column], column, problems, date_format if feed_dates else None, timezone if feed_dates else None
        )
    out["dwt"] = _parse_numbers(out["dwt"], "dwt", problems, integer=True)
    out["quantity"] = _parse_numbers(out["quantity"], "quantity", problems, integer=False)
    for column, choices in ENUMERATIONS.items():
        out[column] = _parse_enum(out[column], column, choices, problems)
    out["vessel_type"] = map_unique(out["vessel_type"], lambda v: canonical_enum("vessel_type", v))
    problems.raise_if_any(name)
    return out


def _check_lengths(out: pd.DataFrame, problems: _Problems) -> None:
    for field, limit in _TEXT_LIMITS.items():
        problems.add(_lengths(out[field]) > limit, field, f"longer than {limit} characters")


def _lengths(column: pd.Series) -> np.ndarray:
    """The length of each value of a text column (0 where missing), counted in C
    (`.str.len()` loops in Python over object columns)."""
    values = column.to_numpy(dtype=object)
    present = ~pd.isna(values)
    lengths = np.zeros(len(values), dtype=np.int64)
    lengths[present] = np.fromiter(map(len, values[present]), dtype=np.int64, count=int(present.sum()))
    return lengths


def _check_characters(out: pd.DataFrame, problems: _Problems) -> None:
    """A NUL character is a bad row on every back end: PostgreSQL cannot store it (the
    file would fail there with a database error instead of a report), and
    spreadsheets drop it, exposing what follows (C9)."""
    for field in FEED_FILE_COLUMNS:
        # One scan of the joined text; the rows are looked for only when there is one.
        if "\0" in "".join(filter(None, out[field].tolist())):  # filter(): skips None in C
            has_nul = map_unique(out[field], lambda v: "\0" in v).eq(True).to_numpy()
            problems.add(has_nul, field, "contains a NUL character")


def _check_ref(out: pd.DataFrame, problems: _Problems) -> None:
    problems.add(out["ref"].isna(), "ref", "ref is required")
    duplicated = out["ref"].notna() & out["ref"].duplicated(keep="first")
    if duplicated.any():
        first_line = out.loc[out["ref"].notna()].drop_duplicates("ref").set_index("ref")["_line"]
        refs = out["ref"].to_numpy()
        problems.add(
            duplicated, "ref", lambda i: f"duplicate ref {refs[i]!r} (first on line {first_line[refs[i]]})"
        )


def _check_port(out: pd.DataFrame, problems: _Problems) -> None:
    port = map_unique(out["port_unlocode"], lambda v: v.upper().replace(" ", ""))
    out["port_unlocode"] = port
    problems.add(port.isna(), "port_unlocode", "port_unlocode is required")
    valid = map_unique(port, looks_like_unlocode)
    values = port.to_numpy()
    problems.add(
        port.notna() & (valid != True),  # noqa: E712 - object column of True/False/None
        "port_unlocode",
        lambda i: f"{values[i]!r} is not a UN/LOCODE (2 letters + 3 letters or digits)",
    )


def _check_vessel(out: pd.DataFrame, problems: _Problems) -> None:
    problems.add(
        out["vessel_imo"].isna() & out["vessel_name"].isna(),
        "vessel_imo",
        "one of vessel_imo or vessel_name is required",
    )
    imo = map_unique(out["vessel_imo"], lambda v: _IMO_PREFIX.sub("", v))
    digits = map_unique(imo, lambda v: len(v) == 7 and v.isdigit()).eq(True).to_numpy()
    valid = np.zeros(len(imo), dtype=bool)
    if digits.any():
        text = "".join(imo[digits]).encode("ascii")
        matrix = np.frombuffer(text, dtype=np.uint8).reshape(-1, 7).astype(np.int64) - ord("0")
        weighted = (matrix[:, :6] * np.arange(7, 1, -1)).sum(axis=1)
        valid[digits] = weighted % 10 == matrix[:, 6]
    values = out["vessel_imo"].to_numpy()
    problems.add(
        out["vessel_imo"].notna().to_numpy() & ~valid,
        "vessel_imo",
        lambda i: f"{values[i]!r} is not a valid IMO number (7 digits, check digit)",
    )
    out["vessel_imo"] = imo.where(valid, None)


def _parse_dates(column: pd.Series, field: str, problems: _Problems, date_format, timezone=None) -> pd.Series:
    """Parse once per distinct value. Times without an offset are UTC (C1), or local
    times of `timezone` when a feed's mapping names one."""
    present = column.notna()
    formats = [date_format] if isinstance(date_format, str) else list(date_format or ["ISO8601"])
    codes, uniques = pd.factorize(column, use_na_sentinel=True)
    distinct = pd.Series(uniques, dtype=object)

    def parse(fmt: str) -> pd.Series:
        if timezone is None:
            return pd.to_datetime(distinct, format=fmt, errors="coerce", utc=True)
        local = pd.to_datetime(distinct, format=fmt, errors="coerce")
        return local.dt.tz_localize(timezone, ambiguous="NaT", nonexistent="shift_forward").dt.tz_convert("UTC")

    parsed_uniques = parse(formats[0])
    for fmt in formats[1:]:
        parsed_uniques = parsed_uniques.fillna(parse(fmt))
    parsed = pd.Series(
        pd.DatetimeIndex(parsed_uniques).take(codes, allow_fill=True, fill_value=pd.NaT), index=column.index
    ).astype("datetime64[ns, UTC]")
    bad = present & parsed.isna()
    values = column.to_numpy()
    expected = f"format {' or '.join(formats)}" if date_format else "ISO 8601 or YYYY-MM-DD"
    problems.add(bad, field, lambda i: f"{values[i]!r} is not a date ({expected})")
    return parsed.dt.floor("s")


#: The largest whole number a 32-bit integer column (dwt) holds on every back end.
_MAX_INTEGER = 2**31 - 1


def _parse_numbers(column: pd.Series, field: str, problems: _Problems, integer: bool) -> pd.Series:
    present = column.notna()
    parsed = pd.to_numeric(column, errors="coerce").astype(float)
    # "inf" and "1e400" parse as infinity, which no column stores: not a number either.
    parsed = parsed.where(np.isfinite(parsed))
    values = column.to_numpy()
    problems.add(present & parsed.isna(), field, lambda i: f"{values[i]!r} is not a number")
    problems.add(present & (parsed < 0), field, lambda i: f"{values[i]!r} is negative")
    if not integer:
        return parsed
    fractional = present & parsed.notna() & (parsed != parsed.round())
    problems.add(fractional, field, lambda i: f"{values[i]!r} is not a whole number")
    too_large = parsed > _MAX_INTEGER
    problems.add(too_large, field, lambda i: f"{values[i]!r} is too large")
    return parsed.where(~too_large).round().astype("Int64")


def _parse_enum(column: pd.Series, field: str, choices: tuple[str, ...], problems: _Problems) -> pd.Series:
    lookup = {c.lower(): c for c in choices}
    mapped = map_unique(column, lambda v: lookup.get(" ".join(v.split()).lower()))
    values = column.to_numpy()
    problems.add(
        column.notna() & mapped.isna(),
        field,
        lambda i: f"{values[i]!r} is not one of {', '.join(choices)}",
    )
    return mapped.astype(object).where(mapped.notna(), None)


def derive(clean: pd.DataFrame, mappings: Mapping[str, str]) -> pd.DataFrame:
    """Add vessel_key, commodity_raw_key, commodity_leaf, directory names and the
    content hash to validated rows."""
    out = clean.copy()
    directory = default_directory()
    # By code, not by Port object: factorizing objects would hash each one per row.
    port_names = map_unique(out["port_unlocode"], lambda code: getattr(directory.get(code), "name", None))
    countries = map_unique(out["port_unlocode"], lambda code: getattr(directory.get(code), "country_name", None))
    out["port_name"] = out["port_name"].fillna(port_names)
    out["country_name"] = out["country_name"].fillna(countries)
    imo_key = map_unique(out["vessel_imo"], lambda v: "IMO" + v)
    name_key = map_unique(out["vessel_name"], lambda v: "NAME:" + vessel_name_key(v))
    out["vessel_key"] = imo_key.fillna(name_key)
    taxonomy = default_taxonomy()
    out["commodity_raw_key"] = map_unique(out["commodity"], lookup_key)
    out["commodity_leaf"] = map_unique(out["commodity"], lambda r: getattr(taxonomy.resolve(r, mappings), "id", None))
    out["content_hash"] = content_hashes(out)
    return out


def content_hashes(frame: pd.DataFrame) -> pd.Series:
    """A 64-bit hash of each row's content fields: equal content, equal hash, on every
    run (pandas' hashing uses a fixed key)."""
    hashed = pd.util.hash_pandas_object(frame[list(CONTENT_FIELDS)], index=False)
    return pd.Series(hashed.to_numpy().view(np.int64), index=frame.index)


def content_json(record) -> dict[str, Any]:
    """A stored record's content as JSON, for its revision history."""
    content = {}
    for field in (*CONTENT_FIELDS, "commodity_leaf"):
        value = getattr(record, field)
        if isinstance(value, dt.datetime):
            value = format_time(value)
        content[field] = value
    return content


def commodity_text(raw: str) -> str:
    """The merge's commodity key part for an unresolved commodity (C2.2)."""
    return "raw:" + commodity_text_key(raw)
