"""Builders of record frames as the store hands them to the merge engine (C2), for the
merge, query and explain tests."""

from __future__ import annotations

import pandas as pd

from store.fields import RECORD_FIELDS, TIME_FIELDS

FEED_A = "aaaaaaaa-0000-4000-8000-000000000001"
FEED_B = "bbbbbbbb-0000-4000-8000-000000000002"
FEED_C = "cccccccc-0000-4000-8000-000000000003"
FEED_NAMES = {FEED_A: "Alpha Lineups", FEED_B: "Bravo Port Data", FEED_C: "Charlie Ships"}

#: Columns of the merge input: identity, precomputed keys, then the C1 record fields.
INPUT_COLUMNS = (
    "ref",
    "source_id",
    "source_name",
    "vessel_key",
    "commodity_key",
    *(f for f in RECORD_FIELDS if f not in ("id", "source_id", "source_name", "combined_date")),
)

_DEFAULTS = {
    "source_id": FEED_A,
    "vessel_key": "IMO9074729",
    "vessel_imo": "9074729",
    "vessel_name": "OCEAN GRACE",
    "port_unlocode": "NLRTM",
    "port_name": "Rotterdam",
    "country_name": "Netherlands",
    "commodity_key": "dry-bulk/coal/thermal-coal",
    "commodity": "steam coal",
    "commodity_normalized": "Thermal Coal",
    "commodity_normalized_subgroup": "Coal",
    "commodity_normalized_group": "Dry Bulk",
    "operation": "disch",
    "eta": "2024-03-01T06:00:00Z",
    "created_at": "2024-02-01T00:00:00Z",
    "updated_at": "2024-02-01T00:00:00Z",
}


def record(ref: str, **fields) -> dict:
    """One stored record: sensible defaults (feed A, OCEAN GRACE at Rotterdam with
    thermal coal, ETA 2024-03-01 06:00) overridden by `fields`. `source_name` follows
    `source_id` unless given."""
    row = {**_DEFAULTS, **fields, "ref": ref}
    row.setdefault("source_name", FEED_NAMES.get(row["source_id"], row["source_id"]))
    return row


def frame(*records: dict) -> pd.DataFrame:
    """The merge input frame of `records`, typed as the store types it."""
    data = {}
    for name in INPUT_COLUMNS:
        values = [r.get(name) for r in records]
        if name in TIME_FIELDS:
            data[name] = pd.to_datetime(pd.Series(values, dtype=object), utc=True).astype("datetime64[ns, UTC]")
        elif name == "dwt":
            data[name] = pd.Series(values, dtype="Int64")
        elif name == "quantity":
            data[name] = pd.Series(values, dtype="float64")
        else:
            data[name] = pd.Series(values, dtype=object)
    return pd.DataFrame(data)


def day(n: float, hour: int = 6) -> str:
    """2024-03-01 plus `n` days at `hour`:00 UTC, as a C1 time string."""
    stamp = pd.Timestamp("2024-03-01T00:00:00Z") + pd.Timedelta(days=n, hours=hour)
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
