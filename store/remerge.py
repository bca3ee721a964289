"""Incremental re-merge: after an ingest, merge again only the merge keys it touched.

Groups never cross a merge key (C2.2: vessel key + port + commodity key), in either
merge mode (C2.6 splits a key's records by feed, never joins keys). So when some
records change, the merged rows of every other key stay exactly as they were, and

    merge(new records) == merged rows of untouched keys + merge(records of touched keys)

as sets of rows (row order carries no meaning before the C3 sort). The touched keys are
those of the changed records, both before and after the change (a record that moved
to another key leaves its old group).

Keys are compared as 64-bit hashes (`key_hashes`), kept beside record frames and merged
rows, so that finding the rows of a thousand keys among a million is an integer
lookup. Two keys that share a hash only cost work: every record and every row of
either key goes through the merge again, which gives their rows unchanged. Pure
functions, arrays and DataFrames in and out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from store import columns, merge

#: The merge key's columns in record frames and merged rows (C2.2).
KEY_COLUMNS = ["vessel_key", "port_unlocode", "commodity_key"]
#: Above this share of records to merge again, a full merge is the cheaper way.
INCREMENTAL_SHARE = 0.25
_MIX = np.uint64(0x100000001B3)


def key_hashes(frame: pd.DataFrame) -> np.ndarray:
    """A uint64 hash of each row's merge key (records or merged rows): equal keys,
    equal hashes, in every process (pandas' hashing has a fixed key)."""
    hashes = np.zeros(len(frame), dtype=np.uint64)
    for column in KEY_COLUMNS:
        hashes = (hashes * _MIX) ^ _text_hashes(frame[column])
    return hashes


def _text_hashes(series: pd.Series) -> np.ndarray:
    """pandas' hash of each value of a text column, null hashed as None; for a
    categorical, once per category."""
    if columns.is_coded(series):
        table = pd.util.hash_array(np.append(np.asarray(series.cat.categories, dtype=object), None))
        return table[series.cat.codes.to_numpy()]  # code -1: the last entry, None
    return pd.util.hash_array(columns.objects(series))


def splice(
    records: pd.DataFrame, keys: np.ndarray, changed: pd.DataFrame
) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """One feed's merge input with `changed` records (`store.records.load_changed`)
    put in place of the cached versions of the same `ref`: `(records, their key
    hashes, the hashes of the merge keys this touches)`. `keys` are the key hashes of
    `records`. Changed records whose commodity is now blank leave the input (C1)."""
    replaced = records["ref"].isin(changed["ref"]).to_numpy()
    served = changed[changed["commodity"].notna()]
    served_keys = key_hashes(served)
    touched = np.unique(np.concatenate([keys[replaced], served_keys]))
    if not replaced.any() and served.empty:
        return records, keys, touched
    updated = columns.concat([records[~replaced], served])
    return updated, np.concatenate([keys[~replaced], served_keys]), touched


def remerge(
    merged: pd.DataFrame,
    merged_keys: np.ndarray,
    parts: list[tuple[pd.DataFrame, np.ndarray]],
    touched: np.ndarray,
    mode: str,
    max_share: float = INCREMENTAL_SHARE,
) -> tuple[pd.DataFrame, np.ndarray] | None:
    """The merged rows (and their key hashes) of the records `parts` (one frame a
    feed, with its key hashes), given `merged` (and `merged_keys`), the rows of the
    same feeds before the records of the keys hashed in `touched` changed: the rows of
    other keys are kept, the touched keys' records merged again (C2). None when more
    than `max_share` of the records would be merged again: a full `merge.merge` is
    then the cheaper way."""
    wanted = pd.Index(np.unique(touched))
    masks = [wanted.get_indexer(keys) >= 0 for _, keys in parts]
    total = sum(len(keys) for _, keys in parts)
    if sum(int(m.sum()) for m in masks) > max_share * max(total, 1):
        return None
    stale = wanted.get_indexer(merged_keys) >= 0
    kept, kept_keys = merged[~stale], merged_keys[~stale]
    touched_records = [frame[m] for (frame, _), m in zip(parts, masks) if m.any()]
    if not touched_records:
        return kept.reset_index(drop=True), kept_keys
    fresh = merge.merge(columns.concat(touched_records), mode)
    rows = columns.concat([kept, fresh])
    return rows, np.concatenate([kept_keys, key_hashes(fresh)])
