"""The values of merged rows (contract C2.5), read from a grouping (`store.merging.merge_plan`).

For each field a group takes the value of its first record in precedence (latest
updated_at first; ties by source_id, then ref) whose value is not blank, null if all
are blank. `source_id` and `source_name` join the group's distinct values, sorted;
`created_at` is the earliest and `updated_at` the latest of the group. Pure numpy:
no Python code runs per record, and per group only where noted.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from store.frames import pd

from store.merging import columns
from store.merging.merge_plan import NAT, Codes, Plan

_STEPS = 3  # records tried one at a time, in precedence, before the rest at once
_CHUNK = 10  # names per table when joining source lists: 1,024 subsets each
_BIG = np.iinfo(np.int64).max


def pick_objects(values: np.ndarray, groups: Plan) -> tuple[np.ndarray, np.ndarray]:
    """Per group, the first non-blank value in precedence of an object column (None if
    all are blank), and the position of the record that gave it (-1 if none)."""
    picked = values[groups.top]
    blank = pd.isna(picked)
    rows = first_valid(groups, blank, lambda at: pd.isna(values[at]))
    fallback = np.flatnonzero(blank)
    picked[fallback] = None
    found = fallback[rows[fallback] >= 0]
    picked[found] = values[rows[found]]
    return picked, rows


def pick_codes(codes: np.ndarray, groups: Plan) -> tuple[np.ndarray, np.ndarray]:
    """`pick_objects` for a coded (categorical) column, -1 for blank: per group, the
    code of its first non-blank value in precedence (-1 if none) and the position of
    the record that gave it."""
    rows = first_valid(groups, codes[groups.top] < 0, lambda at: codes[at] < 0)
    return np.where(rows >= 0, codes[np.maximum(rows, 0)], -1), rows


def pick_numbers(values: np.ndarray, blank: np.ndarray, groups: Plan, fill) -> tuple[np.ndarray, np.ndarray]:
    """`pick_objects` for a numeric column whose blanks `blank` marks; `fill` stands
    for "all blank" in the result."""
    rows = first_valid(groups, blank[groups.top], lambda at: blank[at])
    return np.where(rows >= 0, values[np.maximum(rows, 0)], fill), rows


def first_valid(groups: Plan, top_blank: np.ndarray, blank_at: Callable) -> np.ndarray:
    """Per group, the position of its first record in precedence whose value is not
    blank; -1 when all are. `top_blank` says it for each group's top record,
    `blank_at(positions)` for any records. Groups whose top record is blank look at
    their next records a step at a time (most find a value at once), then at all
    their remaining records together."""
    rows = groups.top.copy()
    missing = np.flatnonzero(top_blank)
    rows[missing] = -1
    for step in range(1, _STEPS + 1):
        missing = missing[groups.sizes[missing] > step]
        if not len(missing):
            return rows
        candidates = groups.order[groups.starts[missing] + step]
        found = ~blank_at(candidates)
        rows[missing[found]] = candidates[found]
        missing = missing[~found]
    missing = missing[groups.sizes[missing] > _STEPS + 1]
    if len(missing):
        _first_valid_beyond(groups, missing, _STEPS + 1, blank_at, rows)
    return rows


def _first_valid_beyond(groups: Plan, missing, skip: int, blank_at, rows) -> None:
    """`first_valid` for the `missing` groups past their first `skip` records, all at
    once; writes into `rows`."""
    lengths = groups.sizes[missing] - skip
    offsets = np.cumsum(lengths) - lengths
    flat = np.arange(int(lengths.sum())) + np.repeat(groups.starts[missing] + skip - offsets, lengths)
    candidates = groups.order[flat]
    found = np.flatnonzero(~blank_at(candidates))
    if len(found):
        segment = np.searchsorted(offsets, found, side="right") - 1
        first = np.concatenate([[True], segment[1:] != segment[:-1]])
        rows[missing[segment[first]]] = candidates[found[first]]


def earliest(times: np.ndarray, groups: Plan) -> np.ndarray:
    """Per group, the earliest of int64 ns `times`, ignoring NAT (NAT if all are)."""
    low = groups.reduce(np.minimum, np.where(times == NAT, _BIG, times))
    low[low == _BIG] = NAT
    return low


def latest(times: np.ndarray, groups: Plan) -> np.ndarray:
    """Per group, the latest of int64 ns `times` (NAT, the lowest int64, if all are)."""
    return groups.reduce(np.maximum, times)


def row_earliest(times: np.ndarray) -> np.ndarray:
    """Per row of a (n, k) int64 ns array, its earliest non-NAT time, else NAT."""
    low = np.where(times == NAT, _BIG, times).min(axis=1, initial=_BIG)
    low[low == _BIG] = NAT
    return low


def row_latest(times: np.ndarray) -> np.ndarray:
    """Per row of a (n, k) int64 ns array, its latest time (NAT if all are)."""
    return times.max(axis=1, initial=NAT)


def value_sets(values: Codes, groups: Plan) -> np.ndarray | None:
    """Per group, the set of its non-blank codes as bits of an int64; None when there
    are too many distinct values for that (see `joined`)."""
    if len(values.uniques) > 62:
        return None
    bits = np.left_shift(np.int64(1), np.maximum(values.codes, 0))
    bits[values.codes < 0] = 0
    return groups.reduce(np.bitwise_or, bits)


def joined(values: Codes, groups: Plan, sets: np.ndarray | None) -> np.ndarray:
    """Per group, its distinct non-blank values joined with ";" in the order of
    `values.uniques` (sorted, for C2.5), None when it has none. `sets` is
    `value_sets(values, groups)`."""
    if sets is None:
        return _joined_per_group(values, groups)
    which, distinct = pd.factorize(sets)
    return _set_texts(np.asarray(distinct, dtype=np.int64), values.uniques)[which]


def joined_categorical(values: Codes, groups: Plan, sets: np.ndarray | None) -> pd.Categorical:
    """`joined` as a categorical with sorted categories (`store.merging.columns`): the texts
    are made once per distinct set of values, which a categorical keeps."""
    if sets is None:
        return columns.category(_joined_per_group(values, groups))
    which, distinct = pd.factorize(sets)
    distinct = np.asarray(distinct, dtype=np.int64)
    which = np.where(distinct[np.maximum(which, 0)] == 0, -1, which)  # the empty set: null
    texts = _set_texts(distinct, values.uniques)
    return columns.recoded(pd.Categorical.from_codes(which, categories=range(len(distinct))), texts)


def _set_texts(sets: np.ndarray, names: np.ndarray) -> np.ndarray:
    """The ";"-joined names of each bit set, built ten names at a time from tables of
    every subset of those ten, so that no Python code runs per set."""
    text = np.full(len(sets), None, dtype=object)
    for low in range(0, len(names), _CHUNK):
        chunk = [str(name) for name in names[low : low + _CHUNK]]
        plain = [";".join(c for i, c in enumerate(chunk) if m >> i & 1) for m in range(1 << len(chunk))]
        part = (sets >> low) & ((1 << _CHUNK) - 1)
        if low == 0:
            text = np.array(plain, dtype=object)[part]
            continue
        led = np.array([";" + t if t else t for t in plain], dtype=object)
        before = (sets & ((1 << low) - 1)) != 0
        text = text + np.where(before, led[part], np.array(plain, dtype=object)[part])
    text[sets == 0] = None
    return text


def _joined_per_group(values: Codes, groups: Plan) -> np.ndarray:
    """`joined` for many distinct values: one Python join per group."""
    n = len(values.uniques)
    labels = groups.labels()
    valid = (labels >= 0) & (values.codes >= 0)
    pairs = np.unique(labels[valid] * n + values.codes[valid])
    text = np.full(groups.n_groups, None, dtype=object)
    for run in np.split(pairs, np.flatnonzero(np.diff(pairs // n)) + 1):
        if len(run):
            text[run[0] // n] = ";".join(str(values.uniques[c]) for c in (run % n).tolist())
    return text
