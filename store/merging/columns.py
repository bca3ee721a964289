"""Text columns as the store holds them in memory: pandas categoricals.

A feed repeats its ports, vessels, commodities and companies on every row, so the
record frames (`store.views.records`) and the merged rows (`store.merging.merge`) keep each text
column as integer codes into its sorted distinct values (a `pd.Categorical`, null
where the code is -1). The merge engine then groups and picks on the codes
(contract C2) without hashing a string, and the CSV writer (`store.views.csvtext`) encodes
each distinct value once. Categories are always in ascending order, so that the
codes sort as the strings do.

Frames of different feeds have different categories; `concat` joins them with the
union of the categories (pandas' own `concat` would fall back to objects).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from store.frames import pd


def is_coded(series: pd.Series | pd.Categorical) -> bool:
    return isinstance(series.dtype, pd.CategoricalDtype)


def category(values: np.ndarray | pd.Series | Sequence) -> pd.Categorical:
    """Text values (str, None/NaN for null) as a categorical with sorted categories."""
    codes, uniques = pd.factorize(np.asarray(values, dtype=object))
    return _sorted(codes, np.asarray(uniques, dtype=object))


def _sorted(codes: np.ndarray, uniques: np.ndarray) -> pd.Categorical:
    """The categorical of `codes` into `uniques` (distinct str), categories sorted.
    The order is found on a fixed-width copy of the strings, compared in C (code
    point order, as Python compares str; a trailing NUL, which ingest refuses, would
    not count)."""
    if len(uniques) > 1:
        order = np.argsort(uniques.astype(str), kind="stable")
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        codes = np.append(rank, -1)[codes]
        uniques = uniques[order]
    return pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(pd.Index(uniques, dtype=object)))


def from_parts(codes: Sequence[np.ndarray], uniques: Sequence[np.ndarray]) -> pd.Categorical:
    """One categorical from pieces already factorized (`codes[i]` index into
    `uniques[i]`, -1 null): the distinct values are merged and sorted once."""
    if not codes:
        return category([])
    if len(codes) == 1:
        return _sorted(np.asarray(codes[0]), np.asarray(uniques[0], dtype=object))
    every = np.concatenate([np.asarray(u, dtype=object) for u in uniques])
    to_all, distinct = pd.factorize(every)
    pieces, offset = [], 0
    for part, values in zip(codes, uniques):
        table = np.append(to_all[offset: offset + len(values)], -1)
        pieces.append(table[part])
        offset += len(values)
    return _sorted(np.concatenate(pieces), np.asarray(distinct, dtype=object))


def union(parts: Sequence[pd.Categorical]) -> pd.Categorical:
    """The parts one after another, as one categorical over the sorted union of their
    categories. Built on the part with the most categories: the others' categories
    are looked up in its (hashed once per Index and kept by pandas); when they hold no
    value it lacks, as when an ingest's few changed records join a feed's cached
    records or re-merged rows join a cached result, its categories serve as they are;
    otherwise the few new values are put in their sorted places. Parts that use a
    small share of their categories are cut down to those first."""
    parts = [_compact(p) if 4 * len(p) < len(p.categories) else p for p in parts]
    base = max(parts, key=lambda p: len(p.categories))
    categories = base.categories
    where = [None if p.categories is categories else categories.get_indexer(p.categories) for p in parts]
    missing = [p.categories[w < 0] for p, w in zip(parts, where) if w is not None and (w < 0).any()]
    if missing:
        new = pd.Index(pd.unique(np.concatenate([np.asarray(m, dtype=object) for m in missing])), dtype=object)
        if 4 * len(new) > len(categories):  # much that is new: sort everything once
            return from_parts([p.codes for p in parts], [np.asarray(p.categories, dtype=object) for p in parts])
        new = new[np.argsort(np.asarray(new, dtype=object).astype(str), kind="stable")]
        old = np.asarray(categories, dtype=object)
        places = np.searchsorted(old, np.asarray(new, dtype=object))
        old_rank = np.arange(len(old)) + np.searchsorted(places, np.arange(len(old)), side="right")
        new_rank = places + np.arange(len(new))
        dtype = pd.CategoricalDtype(pd.Index(np.insert(old, places, np.asarray(new, dtype=object)), dtype=object))
        tables = []
        for p, w in zip(parts, where):
            w = np.arange(len(categories)) if w is None else w
            lookup = np.where(w >= 0, old_rank[np.maximum(w, 0)], new_rank[np.maximum(new.get_indexer(p.categories), 0)])
            tables.append(lookup)
    else:
        dtype, tables = base.dtype, where
    codes = [
        p.codes if table is None else np.append(table, -1)[p.codes]
        for p, table in zip(parts, tables)
    ]
    return pd.Categorical.from_codes(np.concatenate(codes), dtype=dtype, validate=False)


def _compact(part: pd.Categorical) -> pd.Categorical:
    """`part` with only the categories it uses (still sorted)."""
    used = np.unique(part.codes[part.codes >= 0])
    codes = np.where(part.codes >= 0, np.searchsorted(used, part.codes), -1)
    return pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(part.categories[used]), validate=False)


def recoded(codes: pd.Categorical, values: Sequence) -> pd.Categorical:
    """The categorical whose row i is `values[k]` where row i of `codes` is its k-th
    category (null where `codes` is null or the value None): a mapping of the
    categories, computed once per category."""
    array = np.empty(len(values), dtype=object)
    array[:] = list(values)
    which, uniques = pd.factorize(array, sort=True)
    table = np.append(which, -1)
    return pd.Categorical.from_codes(
        table[codes.codes], dtype=pd.CategoricalDtype(pd.Index(uniques, dtype=object))
    )


def objects(series: pd.Series) -> np.ndarray:
    """A text column as an object array of str, None for null (whatever its dtype)."""
    if series.dtype == object:
        return series.to_numpy()
    return series.to_numpy(dtype=object, na_value=None)


def concat(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """`pd.concat(frames, ignore_index=True)` of frames with the same columns, keeping
    text columns categorical: a column that is categorical in any frame is
    categorical in the result, with the sorted union of the categories (each part
    recoded through its categories alone, `union`)."""
    frames = list(frames)
    if not frames:
        raise ValueError("no frames to join")
    if len(frames) == 1:
        return frames[0].reset_index(drop=True)
    data = {}
    for name in frames[0].columns:
        parts = [f[name] for f in frames]
        if any(is_coded(p) for p in parts):
            data[name] = union([p.array if is_coded(p) else category(p) for p in parts])
        else:
            data[name] = pd.concat(parts, ignore_index=True)
    return pd.DataFrame(data, index=pd.RangeIndex(sum(len(f) for f in frames)), copy=False)
