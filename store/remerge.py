"""Incremental re-merge: after an ingest, merge again only the merge keys it touched.

Groups never cross a merge key (C2.2: vessel key + port + commodity key), in either
merge mode (C2.6 splits a key's records by feed, never joins keys). So when some
records change, the merged rows of every other key stay exactly as they were, and

    merge(new records) == merged rows of untouched keys + merge(records of touched keys)

as sets of rows (row order carries no meaning before the C3 sort). The touched keys are
those of the changed records, both before and after the change (a record that moved
to another key leaves its old group). Pure functions, DataFrames in and out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from store import merge

#: The merge key's columns in record frames and merged rows (C2.2).
KEY_COLUMNS = ["vessel_key", "port_unlocode", "commodity_key"]
#: Above this share of records to merge again, a full merge is the cheaper way.
INCREMENTAL_SHARE = 0.25


def splice(records: pd.DataFrame, changed: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One feed's merge input with `changed` records (`store.records.load_changed`)
    put in place of the cached versions of the same `ref`, and the merge keys that
    this touches: `(records, keys)`. Changed records whose commodity is now blank
    leave the input (C1)."""
    replaced = records["ref"].isin(changed["ref"]).to_numpy()
    served = changed[changed["commodity"].notna()]
    keys = pd.concat([records.loc[replaced, KEY_COLUMNS], served[KEY_COLUMNS]], ignore_index=True)
    if not replaced.any() and served.empty:
        return records, keys.iloc[:0]
    updated = pd.concat([records[~replaced], served], ignore_index=True)
    return updated, keys.drop_duplicates(ignore_index=True)


def key_mask(frame: pd.DataFrame, keys: pd.DataFrame) -> np.ndarray:
    """Whether each row of `frame` (records or merged rows) has one of the merge keys
    in `keys` (a frame of KEY_COLUMNS)."""
    mask = np.zeros(len(frame), dtype=bool)
    if keys.empty or frame.empty:
        return mask
    # Few keys change: narrow by vessel first (one hash lookup a row), then compare
    # the whole key of the few rows left.
    candidates = np.flatnonzero(frame["vessel_key"].isin(keys["vessel_key"].unique()).to_numpy())
    if len(candidates):
        wanted = pd.MultiIndex.from_frame(keys[KEY_COLUMNS])
        found = pd.MultiIndex.from_frame(frame[KEY_COLUMNS].iloc[candidates]).isin(wanted)
        mask[candidates[found]] = True
    return mask


def remerge(
    merged: pd.DataFrame,
    parts: list[pd.DataFrame],
    keys: pd.DataFrame,
    mode: str,
    max_share: float = INCREMENTAL_SHARE,
) -> pd.DataFrame | None:
    """The merged rows of the records `parts` (one frame a feed), given `merged`, the
    rows of the same feeds before the records of merge keys `keys` changed: the rows of
    other keys are kept, the keys' records merged again (C2). None when more than
    `max_share` of the records would be merged again: a full `merge.merge` is then
    the cheaper way."""
    masks = [key_mask(part, keys) for part in parts]
    total = sum(len(part) for part in parts)
    if sum(int(m.sum()) for m in masks) > max_share * max(total, 1):
        return None
    touched = [part[m] for part, m in zip(parts, masks) if m.any()]
    kept = merged[~key_mask(merged, keys)]
    if not touched:
        return kept.reset_index(drop=True)
    fresh = merge.merge(pd.concat(touched, ignore_index=True), mode)
    return pd.concat([kept, fresh], ignore_index=True)
