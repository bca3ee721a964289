"""Row validation of feed files (contract C1, C11), column by column.

`validate_frame` checks a frame of strings and returns typed, cleaned columns, or
raises one ValidationError whose `details` list every bad row as
`{"line", "field", "reason"}`. `derive` adds what the store keeps beside the raw
values: vessel key, commodity resolution, port and country names from the
directory, and a content hash that tells a changed row from an unchanged one.
"""

from __future__ import annotations

import datetime as dt
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

_BLANK_WORDS = ["", "n/a", "tbc", "tbn"]
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


def _blank_to_na(column: pd.Series) -> pd.Series:
    text = column.astype(object).where(column.notna(), "").astype(str).str.strip()
    return text.where(~text.str.lower().isin(_BLANK_WORDS), None)


def validate_frame(frame: pd.DataFrame, date_format=None, name: str = "file") -> pd.DataFrame:
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
    problems.raise_if_any(name)

    out = pd.DataFrame({"_line": lines.to_numpy()}, index=frame.index)
    for column in FEED_FILE_COLUMNS:
        out[column] = _blank_to_na(frame[column]) if column in frame.columns else None

    _check_lengths(out, problems)
    _check_ref(out, problems)
    _check_port(out, problems)
    _check_vessel(out, problems)
    for column in (*DATE_FIELDS, "updated_at"):
        out[column] = _parse_dates(out[column], column, problems, date_format if column in DATE_FIELDS else None)
    out["dwt"] = _parse_numbers(out["dwt"], "dwt", problems, integer=True)
    out["quantity"] = _parse_numbers(out["quantity"], "quantity", problems, integer=False)
    for column, choices in ENUMERATIONS.items():
        out[column] = _parse_enum(out[column], column, choices, problems)
    out["vessel_type"] = out["vessel_type"].map(
        lambda v: canonical_enum("vessel_type", v), na_action="ignore"
    )
    problems.raise_if_any(name)
    return out


def _check_lengths(out: pd.DataFrame, problems: _Problems) -> None:
    for field, limit in _TEXT_LIMITS.items():
        problems.add(
            out[field].str.len().gt(limit).to_numpy(),
            field,
            f"longer than {limit} characters",
        )


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
    port = out["port_unlocode"].str.upper().str.replace(" ", "", regex=False)
    out["port_unlocode"] = port
    problems.add(port.isna(), "port_unlocode", "port_unlocode is required")
    valid = port.map(lambda v: looks_like_unlocode(v), na_action="ignore")
    values = port.to_numpy()
    problems.add(
        port.notna() & ~valid.fillna(False).astype(bool),
        "port_unlocode",
        lambda i: f"{values[i]!r} is not a UN/LOCODE (2 letters + 3 letters or digits)",
    )


def _check_vessel(out: pd.DataFrame, problems: _Problems) -> None:
    problems.add(
        out["vessel_imo"].isna() & out["vessel_name"].isna(),
        "vessel_imo",
        "one of vessel_imo or vessel_name is required",
    )
    imo = out["vessel_imo"].str.replace(r"^\s*IMO[\s:]*", "", case=False, regex=True)
    digits = imo.str.fullmatch(r"\d{7}").fillna(False).astype(bool).to_numpy()
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


def _parse_dates(column: pd.Series, field: str, problems: _Problems, date_format) -> pd.Series:
    present = column.notna()
    formats = [date_format] if isinstance(date_format, str) else list(date_format or ["ISO8601"])
    parsed = pd.to_datetime(column, format=formats[0], errors="coerce", utc=True)
    for fmt in formats[1:]:
        parsed = parsed.fillna(pd.to_datetime(column, format=fmt, errors="coerce", utc=True))
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
    lowered = column.str.lower().str.split().str.join(" ")
    mapped = lowered.map(lookup)
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
    ports = out["port_unlocode"].map(lambda code: directory.get(code))
    out["port_name"] = out["port_name"].fillna(ports.map(lambda p: p.name if p else None))
    out["country_name"] = out["country_name"].fillna(ports.map(lambda p: p.country_name if p else None))
    names = out["vessel_name"].dropna().unique()
    name_keys = {n: vessel_name_key(n) for n in names}
    out["vessel_key"] = np.where(
        out["vessel_imo"].notna(),
        "IMO" + out["vessel_imo"].fillna(""),
        "NAME:" + out["vessel_name"].map(name_keys).fillna(""),
    )
    taxonomy = default_taxonomy()
    raws = out["commodity"].dropna().unique()
    raw_keys = {r: lookup_key(r) for r in raws}
    leaves = {r: taxonomy.resolve(r, mappings) for r in raws}
    out["commodity_raw_key"] = out["commodity"].map(raw_keys)
    out["commodity_leaf"] = out["commodity"].map(lambda r: leaves[r].id if leaves[r] else None, na_action="ignore")
    hashed = pd.util.hash_pandas_object(out[list(CONTENT_FIELDS)].astype(str), index=False)
    out["content_hash"] = [format(int(h), "016x") for h in hashed.to_numpy()]
    return out


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
