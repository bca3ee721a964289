"""Row validation of feed files (contract C1, C11), column by column, each check run
once per distinct value of a column (`Distinct`).

`validate_frame` checks a frame of strings and returns typed, cleaned columns, or
raises one ValidationError whose `details` list every bad row as
`{"line", "field", "reason"}`. `derive` adds what the store keeps beside the raw
values: vessel key, commodity resolution, port and country names from the
directory, and a content hash that tells a changed row from an unchanged one.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

import numpy as np
from store.frames import pd

from store.errors import ValidationError
from store.fields import (
    _BLANK_WORDS,
    CONTENT_FIELDS,
    DATE_FIELDS,
    ENUMERATIONS,
    FEED_FILE_COLUMNS,
    canonical_enum,
)
from store.normalize import commodity_text_key, lookup_key, vessel_name_key
from store.reference.ports import default_directory, looks_like_unlocode
from store.database.schema import Record
from store.reference.taxonomy import default_taxonomy

_IMO_PREFIX = re.compile(r"^\s*IMO[\s:]*", re.IGNORECASE)
#: Dates of a vessel call lie in [FIRST_DATE, END_DATE): outside are placeholders for
#: "unknown" (0001-01-01, 9999-12-31) and typos, which pandas cannot even hold.
FIRST_DATE = pd.Timestamp("1900-01-01", tz="UTC")
END_DATE = pd.Timestamp("2101-01-01", tz="UTC")
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

    def raise_if_any(self, name: str, hint: str = "") -> None:
        if self.items:
            self.items.sort(key=lambda item: (item["line"], item["field"] or ""))
            bad_lines = len({item["line"] for item in self.items})
            raise ValidationError(
                f"{name}: {hint or f'{bad_lines} bad row(s), {len(self.items)} problem(s)'}; "
                "the file was refused whole and nothing was written",
                self.items,
            )


class Distinct:
    """A column as codes into its distinct values (code -1: missing), so that every
    check and conversion runs once per distinct value. Feed columns repeat a few
    values (ports, companies, enumerations, times) over many rows: one factorize per
    column, reused by every later step, is what keeps ingest fast."""

    def __init__(self, codes: np.ndarray, values: np.ndarray):
        self.codes = codes
        self.values = values

    @classmethod
    def of(cls, column: pd.Series) -> Distinct:
        """The distinct values of `column`; None and NaN are missing."""
        if isinstance(column.dtype, pd.CategoricalDtype):
            return cls(column.cat.codes.to_numpy(), column.cat.categories.to_numpy(dtype=object))
        # Plain object arrays: pandas' string arrays factorize and iterate far slower.
        codes, uniques = pd.factorize(column.to_numpy(dtype=object), use_na_sentinel=True)
        return cls(codes, np.asarray(uniques, dtype=object))

    @classmethod
    def missing_column(cls, rows: int) -> Distinct:
        return cls(np.full(rows, -1, dtype=np.intp), np.empty(0, dtype=object))

    @property
    def missing(self) -> np.ndarray:
        return self.codes < 0

    def map(self, function) -> Distinct:
        """`function` applied once per distinct value; a None result is missing."""
        values = self.values.tolist()
        mapped = [function(v) for v in values]
        if mapped == values:  # the common case of clean text: no need to factorize again
            return self
        return Distinct(self.codes, np.array(mapped, dtype=object)).deduplicated()

    def deduplicated(self) -> Distinct:
        """The same rows with each value once among `values` (None: missing)."""
        codes, uniques = pd.factorize(np.append(self.values, None), use_na_sentinel=True)
        # The None appended above is code -1 of the result: where missing rows land.
        return Distinct(codes[self.codes], np.asarray(uniques, dtype=object))

    def test(self, predicate) -> np.ndarray:
        """For each row, `predicate` of its value (False where missing)."""
        flags = np.fromiter(map(predicate, self.values.tolist()), dtype=bool, count=len(self.values))
        return self.spread(flags, False)

    def spread(self, per_value: np.ndarray, fill) -> np.ndarray:
        """An array of one entry per distinct value as one entry per row, `fill` where
        missing."""
        return np.append(per_value, np.array([fill], dtype=per_value.dtype))[self.codes]

    def rows(self) -> np.ndarray:
        """The values row by row, None where missing."""
        return self.spread(self.values, None)

    def value(self, position: int) -> str:
        return self.values[self.codes[position]]

    def fill(self, other: Distinct) -> Distinct:
        """This column's values, and `other`'s where this one is missing."""
        values = np.concatenate([self.values, other.values])
        moved = np.where(other.codes < 0, -1, other.codes + len(self.values))
        return Distinct(np.where(self.missing, moved, self.codes), values).deduplicated()

    def categorical(self) -> pd.Categorical:
        """The column as a pandas categorical: later steps (`derive`, the content hash,
        the values for the driver) then work on its codes, not on each row's text."""
        dtype = pd.CategoricalDtype(pd.Index(self.values, dtype=object))
        return pd.Categorical.from_codes(self.codes, dtype=dtype)


def _clean_text(value: object) -> str | None:
    text = str(value).strip()
    # No blank word is longer than three characters: most values skip `lower()`.
    return None if len(text) <= 3 and text.lower() in _BLANK_WORDS else text


def validate_frame(frame: pd.DataFrame, date_format=None, name: str = "file", timezone: str | None = None) -> pd.DataFrame:
    """Typed, cleaned rows of a feed file (`date_format`: a strptime format or a list
    of them, tried in order; default ISO 8601): text columns but `ref` as categoricals,
    missing values as NaN/NaT/NA. Raises ValidationError listing every bad row (line,
    field, reason); the `_line` column gives file lines."""
    lines = frame["_line"]
    problems = _Problems(lines)
    # Rows the reader could not read (JSON Lines, store.intake.feedfile) join the report.
    problems.items.extend(frame.attrs.get("problems", ()))
    unknown = [c for c in frame.columns if c != "_line" and c not in FEED_FILE_COLUMNS]
    for column in unknown:
        problems.items.append({"line": 1, "field": column, "reason": "unknown column"})
    missing = _missing_columns(frame.columns)
    # Without a required column the rows cannot be checked; unknown columns are
    # reported together with the rows' problems, so that one run shows them all.
    if missing:
        problems.items.extend(missing)
        known = [c for c in frame.columns if c in FEED_FILE_COLUMNS]
        problems.raise_if_any(name, _FOREIGN_HINT if unknown and not known else "")

    text = {
        column: Distinct.of(frame[column]).map(_clean_text)
        if column in frame.columns
        else Distinct.missing_column(len(frame))
        for column in FEED_FILE_COLUMNS
    }
    _check_lengths(text, problems)
    _check_characters(text, problems)
    _check_ref(text["ref"], lines, problems)
    text["port_unlocode"] = _check_port(text["port_unlocode"], problems)
    text["vessel_imo"] = _check_vessel(text["vessel_imo"], text["vessel_name"], problems)
    typed: dict[str, Any] = {}
    for column in (*DATE_FIELDS, "updated_at"):
        feed_dates = column in DATE_FIELDS
        typed[column] = _parse_dates(
            text[column], column, problems, date_format if feed_dates else None, timezone if feed_dates else None
        )
    typed["dwt"] = _parse_numbers(text["dwt"], "dwt", problems, integer=True)
    typed["quantity"] = _parse_numbers(text["quantity"], "quantity", problems, integer=False)
    for column, choices in ENUMERATIONS.items():
        text[column] = _parse_enum(text[column], column, choices, problems)
    text["vessel_type"] = text["vessel_type"].map(lambda v: canonical_enum("vessel_type", v))
    problems.raise_if_any(name)
    out = pd.DataFrame({"_line": lines.to_numpy()}, index=frame.index)
    for column in FEED_FILE_COLUMNS:
        if column in typed:
            out[column] = pd.Series(typed[column], index=frame.index)
        elif column == "ref":  # one value a row: object, not pandas' string dtype
            out[column] = pd.Series(text[column].rows(), index=frame.index, dtype=object)
        else:
            out[column] = pd.Series(text[column].categorical(), index=frame.index)
    return out


#: What a file none of whose columns is a feed field needs (issue 18.10).
_FOREIGN_HINT = (
    "none of the file's columns is a feed field: describe its format in a mapping file "
    "and pass it with --mapping (docs/operators.md, section 6)"
)


def _missing_columns(columns) -> list[dict[str, Any]]:
    """Header problems: a required column that the file lacks."""
    missing = [
        {"line": 1, "field": required, "reason": "required column is missing"}
        for required in ("ref", "port_unlocode")
        if required not in columns
    ]
    if "vessel_imo" not in columns and "vessel_name" not in columns:
        missing.append({"line": 1, "field": "vessel_imo", "reason": "a vessel_imo or vessel_name column is required"})
    return missing


def _check_lengths(text: dict[str, Distinct], problems: _Problems) -> None:
    for field, limit in _TEXT_LIMITS.items():
        column = text[field]
        lengths = np.fromiter(map(len, column.values.tolist()), dtype=np.int64, count=len(column.values))
        problems.add(column.spread(lengths > limit, False), field, f"longer than {limit} characters")


def _check_characters(text: dict[str, Distinct], problems: _Problems) -> None:
    """A NUL character is a bad row on every back end: PostgreSQL cannot store it (the
    file would fail there with a database error instead of a report), and
    spreadsheets drop it, exposing what follows (C9)."""
    for field in FEED_FILE_COLUMNS:
        column = text[field]
        # One scan of the joined values; the rows are looked for only when there is one.
        if "\0" in "".join(column.values.tolist()):
            problems.add(column.test(lambda v: "\0" in v), field, "contains a NUL character")


def _check_ref(ref: Distinct, lines: pd.Series, problems: _Problems) -> None:
    problems.add(ref.missing, "ref", "ref is required")
    duplicated = ~ref.missing & pd.Series(ref.codes).duplicated(keep="first").to_numpy()
    if duplicated.any():
        refs = ref.rows()
        present = ~ref.missing
        first_line = (
            pd.DataFrame({"ref": refs[present], "_line": lines.to_numpy()[present]})
            .drop_duplicates("ref")
            .set_index("ref")["_line"]
        )
        problems.add(
            duplicated, "ref", lambda i: f"duplicate ref {refs[i]!r} (first on line {first_line[refs[i]]})"
        )


def _check_port(port: Distinct, problems: _Problems) -> Distinct:
    """The port codes upper-cased without spaces; bad ones reported."""
    port = port.map(lambda v: v.upper().replace(" ", ""))
    problems.add(port.missing, "port_unlocode", "port_unlocode is required")
    problems.add(
        ~port.missing & ~port.test(looks_like_unlocode),
        "port_unlocode",
        lambda i: f"{port.value(i)!r} is not a UN/LOCODE (2 letters + 3 letters or digits)",
    )
    return port


def _check_vessel(given: Distinct, names: Distinct, problems: _Problems) -> Distinct:
    """The valid IMO numbers' seven digits (missing where invalid); bad ones reported."""
    problems.add(given.missing & names.missing, "vessel_imo", "one of vessel_imo or vessel_name is required")
    imo = given.map(lambda v: _IMO_PREFIX.sub("", v))
    digits = np.array([len(v) == 7 and v.isdigit() for v in imo.values.tolist()], dtype=bool)
    valid = np.zeros(len(imo.values), dtype=bool)
    if digits.any():
        text = "".join(imo.values[digits]).encode("ascii")
        matrix = np.frombuffer(text, dtype=np.uint8).reshape(-1, 7).astype(np.int64) - ord("0")
        weighted = (matrix[:, :6] * np.arange(7, 1, -1)).sum(axis=1)
        valid[digits] = weighted % 10 == matrix[:, 6]
    valid_rows = imo.spread(valid, False)
    problems.add(
        ~given.missing & ~valid_rows,
        "vessel_imo",
        lambda i: f"{given.value(i)!r} is not a valid IMO number (7 digits, check digit)",
    )
    return Distinct(np.where(valid_rows, imo.codes, -1), imo.values)


def _parse_dates(column: Distinct, field: str, problems: _Problems, date_format, timezone=None) -> pd.DatetimeIndex:
    """Parse once per distinct value. Times without an offset are UTC (C1), or local
    times of `timezone` when a feed's mapping names one."""
    formats = [date_format] if isinstance(date_format, str) else list(date_format or ["ISO8601"])
    distinct = pd.Series(column.values, dtype=object)

    def parse(fmt: str) -> pd.Series:
        # Microseconds hold the years 1 to 9999, which nanoseconds do not (issue 16.11).
        if timezone is None:
            return pd.to_datetime(distinct, format=fmt, errors="coerce", utc=True).astype("datetime64[us, UTC]")
        local = pd.to_datetime(distinct, format=fmt, errors="coerce").astype("datetime64[us]")
        return local.dt.tz_localize(timezone, ambiguous="NaT", nonexistent="shift_forward").dt.tz_convert("UTC")

    parsed_uniques = parse(formats[0])
    for fmt in formats[1:]:
        parsed_uniques = parsed_uniques.fillna(parse(fmt))
    outside = ((parsed_uniques < FIRST_DATE) | (parsed_uniques >= END_DATE)).to_numpy()
    parsed_uniques = parsed_uniques.where(~outside)
    parsed = pd.DatetimeIndex(parsed_uniques.astype("datetime64[ns, UTC]").dt.floor("s"))
    rows = parsed.take(column.codes, allow_fill=True, fill_value=pd.NaT)
    outside_rows = column.spread(outside, False)
    expected = f"format {' or '.join(formats)}" if date_format else "ISO 8601 or YYYY-MM-DD"
    problems.add(
        outside_rows,
        field,
        lambda i: f"{column.value(i)!r} is not a date of a vessel call (years {FIRST_DATE.year} to "
        f"{END_DATE.year - 1}); leave the cell blank when the date is unknown",
    )
    problems.add(
        ~column.missing & rows.isna() & ~outside_rows, field, lambda i: f"{column.value(i)!r} is not a date ({expected})"
    )
    return rows


#: The largest whole number a 32-bit integer column (dwt) holds on every back end.
_MAX_INTEGER = 2**31 - 1
#: The largest quantity a cargo has, in any unit (issue 16.13): a VLCC carries about
#: 2,000,000 BBL; a larger number is a typo or a placeholder. Below it a float keeps
#: whole numbers exact.
MAX_QUANTITY = 100_000_000


def _parse_numbers(
    column: Distinct, field: str, problems: _Problems, integer: bool
) -> pd.api.extensions.ExtensionArray:
    present = ~column.missing
    # A None among the values when rows miss one, as in the whole column: it decides
    # whether pandas parses the values as integers or as floats.
    distinct = column.values.tolist() + ([None] if not present.all() else [])
    parsed = pd.to_numeric(pd.Series(distinct, dtype=object), errors="coerce").astype(float).to_numpy()
    parsed = pd.Series(column.spread(parsed[: len(column.values)], np.nan))
    # "inf" and "1e400" parse as infinity, which no column stores: not a number either.
    parsed = parsed.where(np.isfinite(parsed))
    problems.add(present & parsed.isna(), field, lambda i: f"{column.value(i)!r} is not a number")
    problems.add(present & (parsed < 0), field, lambda i: f"{column.value(i)!r} is negative")
    if not integer:
        too_large = parsed > MAX_QUANTITY
        problems.add(too_large, field, lambda i: f"{column.value(i)!r} is more than {MAX_QUANTITY:,}")
        return parsed.where(~too_large).array
    fractional = present & parsed.notna() & (parsed != parsed.round())
    problems.add(fractional, field, lambda i: f"{column.value(i)!r} is not a whole number")
    too_large = parsed > _MAX_INTEGER
    problems.add(too_large, field, lambda i: f"{column.value(i)!r} is too large")
    return parsed.where(~too_large).round().astype("Int64").array


def _parse_enum(column: Distinct, field: str, choices: tuple[str, ...], problems: _Problems) -> Distinct:
    lookup = {c.lower(): c for c in choices}
    mapped = column.map(lambda v: lookup.get(" ".join(v.split()).lower()))
    problems.add(
        ~column.missing & mapped.missing,
        field,
        lambda i: f"{column.value(i)!r} is not one of {', '.join(choices)}",
    )
    return mapped


def derive(clean: pd.DataFrame, mappings: Mapping[str, str]) -> pd.DataFrame:
    """Add vessel_key, commodity_raw_key, commodity_leaf, directory names and the
    content hash to validated rows."""
    out = clean.copy(deep=False)  # copy-on-write: the caller's frame is not changed
    directory = default_directory()
    # By code, not by Port object: factorizing objects would hash each one per row.
    port = Distinct.of(out["port_unlocode"])
    port_names = port.map(lambda code: getattr(directory.get(code), "name", None))
    countries = port.map(lambda code: getattr(directory.get(code), "country_name", None))
    out["port_name"] = _series(Distinct.of(out["port_name"]).fill(port_names), out)
    out["country_name"] = _series(Distinct.of(out["country_name"]).fill(countries), out)
    imo_key = Distinct.of(out["vessel_imo"]).map(lambda v: "IMO" + v)
    name_key = Distinct.of(out["vessel_name"]).map(lambda v: "NAME:" + vessel_name_key(v))
    out["vessel_key"] = _series(imo_key.fill(name_key), out)
    # The name beside an IMO number too (issue 19 rule 1; empty names: none).
    out["name_key"] = _series(Distinct.of(out["vessel_name"]).map(lambda v: ("NAME:" + vessel_name_key(v)) if vessel_name_key(v) else None), out)
    taxonomy = default_taxonomy()
    commodity = Distinct.of(out["commodity"])
    out["commodity_raw_key"] = _series(commodity.map(lookup_key), out)
    out["commodity_leaf"] = _series(commodity.map(lambda r: getattr(taxonomy.resolve(r, mappings), "id", None)), out)
    out["content_hash"] = content_hashes(out)
    return out


def _series(column: Distinct, frame: pd.DataFrame) -> pd.Series:
    return pd.Series(column.categorical(), index=frame.index)


def content_hashes(frame: pd.DataFrame) -> pd.Series:
    """A 64-bit hash of each row's content fields: equal content, equal hash, on every
    run (pandas' hashing uses a fixed key)."""
    hashed = pd.util.hash_pandas_object(frame[list(CONTENT_FIELDS)], index=False)
    return pd.Series(hashed.to_numpy().view(np.int64), index=frame.index)


def commodity_text(raw: str) -> str:
    """The merge's commodity key part for an unresolved commodity (C2.2)."""
    return "raw:" + commodity_text_key(raw)
