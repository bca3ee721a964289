"""Provenance of a merged row: which records it merges, which record gave each value,
and where the feeds disagree (contract C2).

`explain` re-runs the merge (`store.merging.merge.merge_resolved`) and reads the members of
one row. Groups never span a (resolved) vessel and port, so a caller may pass only the
records of the row's port whose vessel key is the row's or a name resolved to it (under
by_source, also of its commodity key and feed), with the identities of the whole
view (issue 19): the row and its id come out the same, much faster than over a whole
store.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from store.frames import pd

from store.fields import DATE_FIELDS, RECORD_FIELDS, TIME_FIELDS, format_time
from store.merging.merge import PICKED_FIELDS, merge_resolved
from store.merging.resolve import Identities, Resolution
from store.reference.taxonomy import default_taxonomy

#: The rule that made each kind of field, in the words a buyer reads in the explorer and
#: the provenance endpoint (issue 18.2: no clause numbers there; they are C2.5, C1, C2.7).
RULES = {
    "picked": "the value of the most recently updated record that gives one",
    "sources": "every record's value, each once, sorted alphabetically, joined with ';'",
    "created_at": "the earliest creation time of the records",
    "updated_at": "the latest update time of the records",
    "combined_date": "the earliest of the merged eta, etb and etd",
    "id": "made from the vessel, port, commodity, first date and counterparties of the call",
}
#: Two times further apart than this are a disagreement; closer ones are the same call.
TIME_TOLERANCE = dt.timedelta(hours=24)


def explain(
    row_id: str, records: pd.DataFrame, mode: str = "all", identities: Identities | None = None
) -> dict[str, Any] | None:
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
      24 h), each with its distinct `values` and the records that gave them;
    - `resolutions`: what the merge resolved (issue 19 rule 4), each with its `kind`
      ("vessel": a name-only record merged as an IMO; "commodity": an unspecified
      leaf that joined a specific one), a `text` in plain words and its `records`.
    `identities` are those of the whole view when `records` are only part of it.
    Raises ValueError for an unknown mode."""
    if mode == "all" and identities is None:
        identities = Identities.of_records(records, feeds=True)
    rows, membership, resolution = merge_resolved(records, mode, identities)
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
        "resolutions": _resolutions(members, resolution, row),
    }


def _resolutions(members: pd.DataFrame, resolution: Resolution | None, row: pd.Series) -> list[dict[str, Any]]:
    """Issue 19 rule 4: "IMO 9345934 from Alpha Lineups, matched by name HARMONY
    PACIFIC"; "Iron Ore (Unspecified) from Bravo Port Data joined Iron Ore Fines"."""
    if resolution is None:
        return []
    out: list[dict[str, Any]] = []
    vessels: dict[tuple[str, str], list[pd.Series]] = {}
    commodities: dict[tuple[str, str], list[pd.Series]] = {}
    for index, r in members.iterrows():
        name = resolution.vessel_from.get(index)
        if isinstance(name, str):
            vessels.setdefault((name, str(resolution.frame.at[index, "vessel_key"])), []).append(r)
        leaf = resolution.commodity_from.get(index)
        if isinstance(leaf, str):
            commodities.setdefault((leaf, str(r["source_name"])), []).append(r)
    for (name, imo), given in sorted(vessels.items()):
        feeds = ", ".join(resolution.identities.feeds(name, imo)) or "the other records"
        text = f"IMO {imo.removeprefix('IMO')} from {feeds}, matched by name {name.removeprefix('NAME:')}"
        out.append({"kind": "vessel", "text": text, "records": [_who(r) for r in given]})
    taxonomy = default_taxonomy()
    target = _leaf_name(taxonomy, row["commodity_key"])
    for (leaf, source), given in sorted(commodities.items()):
        text = f"{_leaf_name(taxonomy, leaf)} from {source} joined {target}"
        out.append({"kind": "commodity", "text": text, "records": [_who(r) for r in given]})
    return out


def _leaf_name(taxonomy, leaf_id) -> str:
    try:
        return taxonomy.leaf(leaf_id).name
    except KeyError:
        return str(leaf_id)


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
        rule, by = RULES["picked"], next(([r] for r in given if not pd.isna(r[field])), [])
    elif field in ("source_id", "source_name"):
        rule, by = RULES["sources"], given
    elif field == "created_at":
        rule, by = RULES["created_at"], [r for r in given if _json(r[field]) == value]
    elif field == "updated_at":
        rule, by = RULES["updated_at"], [r for r in given if _json(r[field]) == value]
    elif field == "combined_date":
        rule, by = RULES["combined_date"], _date_suppliers(row, given)
    else:
        rule, by = RULES["id"], []
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

