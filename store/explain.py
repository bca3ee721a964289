"""Provenance of a merged row: which records it merges, which record gave each value,
and where the feeds disagree (contract C2).

`explain` re-runs the merge (`store.merge.merge_groups`) and reads the members of one
row. Groups never span merge keys, so a caller may pass only the records that share
the row's vessel_key, port_unlocode and commodity_key (and, under by_source, feed):
the row and its id come out the same, much faster than over a whole store.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pandas as pd

from store.fields import DATE_FIELDS, RECORD_FIELDS, TIME_FIELDS, format_time
from store.merge import PICKED_FIELDS, merge_groups

#: Two times further apart than this are a disagreement; closer ones are the same call.
TIME_TOLERANCE = dt.timedelta(hours=24)


def explain(row_id: str, records: pd.DataFrame, mode: str = "all") -> dict[str, Any] | None:
    """The provenance of merged row `row_id` under merge `mode` over `records` (the
    store's record frame, as for `merge`), or None when no merged row has that id.

    Returns a JSON-serialisable dict:
    - `id`, `merge`: the row and the mode;
    - `records`: its source records in C2.5 precedence (latest update first), each
      with `source_id`, `source_name`, `ref`, `created_at`, `updated_at` (C1 times);
    - `fields`: for every C1 field, its merged `value`, the `rule` that made it and
      `supplied_by`, the records (`ref`, `source_id`) it came from (empty: none);
    - `disagreements`: the fields whose non-blank values differ between the records
      (text ignoring case and spacing, numbers exactly, eta/etb/etd by more than
      24 h), each with its distinct `values` and the records that gave them.
    Raises ValueError for an unknown mode."""
    rows, membership = merge_groups(records, mode)
    found = rows.index[rows["id"] == row_id]
    if not len(found):
        return None
    row = rows.loc[found[0]]
    members = _in_precedence(records[(membership == row_id).to_numpy()])
    return {
        "id": row_id,
        "merge": mode,
        "records": [_record_summary(r) for _, r in members.iterrows()],
        "fields": {field: _field(field, row, members) for field in RECORD_FIELDS},
        "disagreements": [d for f in PICKED_FIELDS if (d := _disagreement(f, members))],
    }


def _in_precedence(members: pd.DataFrame) -> pd.DataFrame:
    """C2.5's order: updated_at descending, then source_id and ref ascending."""
    order = sorted(
        range(len(members)),
        key=lambda i: (
            -_ns(members["updated_at"].iloc[i]),
            str(members["source_id"].iloc[i]),
            str(members["ref"].iloc[i]),
        ),
    )
    return members.iloc[order]


def _ns(value) -> int:
    return pd.Timestamp(value).value if not pd.isna(value) else -(2**63)


def _record_summary(r: pd.Series) -> dict[str, Any]:
    return {
        "source_id": _json(r["source_id"]),
        "source_name": _json(r["source_name"]),
        "ref": _json(r["ref"]),
        "created_at": _json(r["created_at"]),
        "updated_at": _json(r["updated_at"]),
    }


def _who(r: pd.Series) -> dict[str, Any]:
    return {"ref": _json(r["ref"]), "source_id": _json(r["source_id"])}


def _field(field: str, row: pd.Series, members: pd.DataFrame) -> dict[str, Any]:
    value = _json(row[field])
    given = [r for _, r in members.iterrows()]
    if field in PICKED_FIELDS:
        rule, by = "latest non-blank value (C2.5)", next(([r] for r in given if not pd.isna(r[field])), [])
    elif field in ("source_id", "source_name"):
        rule, by = "every record's value, distinct, sorted, joined with ';' (C2.5)", given
    elif field == "created_at":
        rule, by = "earliest of the records (C2.5)", [r for r in given if _json(r[field]) == value]
    elif field == "updated_at":
        rule, by = "latest of the records (C2.5)", [r for r in given if _json(r[field]) == value]
    elif field == "combined_date":
        rule, by = "earliest of the merged eta, etb, etd (C1)", _date_suppliers(row, given)
    else:
        rule, by = "computed from the merge key, first anchor and counterparties (C2.7)", []
    return {"value": value, "rule": rule, "supplied_by": [_who(r) for r in by]}


def _date_suppliers(row: pd.Series, given: list[pd.Series]) -> list[pd.Series]:
    for field in DATE_FIELDS:
        if not pd.isna(row[field]) and row[field] == row["combined_date"]:
            return next(([r] for r in given if not pd.isna(r[field])), [])
    return []


def _disagreement(field: str, members: pd.DataFrame) -> dict[str, Any] | None:
    """The distinct non-blank values of `field` among `members` when they disagree."""
    values: dict[Any, dict[str, Any]] = {}
    for _, r in members.iterrows():
        if pd.isna(r[field]):
            continue
        entry = values.setdefault(_comparable(field, r[field]), {"value": _json(r[field]), "records": []})
        entry["records"].append({**_who(r), "source_name": _json(r["source_name"])})
    if len(values) < 2:
        return None
    if field in TIME_FIELDS:
        times = [pd.Timestamp(v) for v in values]
        if max(times) - min(times) <= TIME_TOLERANCE:
            return None
    return {"field": field, "values": list(values.values())}


def _comparable(field: str, value):
    if field in TIME_FIELDS:
        return pd.Timestamp(value).isoformat()
    if isinstance(value, str):
        return " ".join(value.split()).casefold()
    return value


def _json(value):
    """A frame value as JSON: None for blanks, C1 time strings, plain numbers."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return None
    if isinstance(value, (pd.Timestamp, dt.datetime)):
        return format_time(value)
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return value

