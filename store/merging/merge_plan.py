"""Which stored records form one merged row, and in which precedence (contract C2.2–C2.6).

This is the grouping half of the merge engine (`store.merging.merge` assembles the rows).
`group_records` reads the record frame once into integer codes and nanosecond arrays
(`RecordArrays`), forms the groups of C2.4 and orders each group's records by the value
precedence of C2.5 (`Plan`). Pure: no I/O, nothing kept between calls.

How the groups are found, fast and exactly as C2.4 says:

1. Records are sorted by (merge key, anchor). A *chain* is a maximal run of one key
   whose consecutive anchors lie at most 7×24 h apart. Every C2.4 group lies inside one
   chain (a record only joins a group holding an anchor within 7 days of its own).
2. A chain whose records never disagree on shipper, receiver or charterer is exactly
   one group: each record finds its predecessor's group within the window and without
   conflict. Almost every chain is like that, and costs nothing beyond the sort.
3. A chain with a counterparty disagreement is replayed record by record in C2.4's
   order (anchor, updated_at, source_id, ref), in Python. When several groups qualify,
   the one with the latest anchor wins; on equal latest anchors, the older group.

A record without a date, or with a blank key part, never merges (C2.3): it is a group of
its own. Records with a blank commodity take part in no group (C1, seed 4.1 rule 3).
"""

from __future__ import annotations

from concurrent.futures import Executor, Future
from dataclasses import dataclass, field

import numpy as np
from store.frames import pd

# The C1 blank words are defined once, in store.fields; `blank_mask` is its fast form.
from store.fields import _BLANK_WORDS, COUNTERPARTY_FIELDS, DATE_FIELDS, is_blank

#: The int64 that stands for a missing time (pandas' NaT).
NAT = np.iinfo(np.int64).min
#: The transitive merge window of C2.4 / seed 8: 7×24 hours, inclusive.
WINDOW_NS = 7 * 24 * 3600 * 10**9
_SECOND = 10**9
_INT64_ROOM = 2**62


@dataclass(frozen=True)
class Codes:
    """A string column as integer codes into `uniques`; -1 where the value is blank."""

    codes: np.ndarray
    uniques: np.ndarray

    def values_at(self, rows: np.ndarray) -> np.ndarray:
        """The strings at record positions `rows` (None where blank or `rows` is -1)."""
        table = np.append(self.uniques.astype(object), None)
        codes = np.where(rows >= 0, self.codes[np.maximum(rows, 0)], -1)
        return table[codes]


@dataclass(frozen=True)
class RecordArrays:
    """The record frame as the grouping needs it, one entry per record position."""

    vessel: Codes  #: vessel_key (C2.2)
    port: Codes  #: port_unlocode
    commodity: Codes  #: commodity_key (C2.2)
    source: Codes  #: source_id; uniques sorted, so codes order feeds alphabetically
    counterparties: dict[str, Codes]  #: normalized shipper/receiver/charterer (C2.4), int32
    anchor: np.ndarray  #: int64 ns of eta, else etb, else etd; NAT when none (C2.3)
    updated: np.ndarray  #: int64 ns of updated_at; NAT when missing
    refs: np.ndarray  #: the feeds' own record ids (object)
    excluded: np.ndarray  #: bool, the commodity is blank: the record is never served

    def __len__(self) -> int:
        return len(self.refs)


@dataclass(frozen=True)
class Plan:
    """The groups of a merge. Group g is `order[starts[g] : starts[g] + sizes[g]]`: its
    record positions in C2.5 precedence (latest updated_at first; ties by source_id,
    then ref, ascending). Groups are numbered in the order of their top records'
    positions, so reading a column at `top` goes front to back. `segments[s]` is the
    group whose records come s-th in `order`. Excluded records are in no group."""

    order: np.ndarray
    starts: np.ndarray
    sizes: np.ndarray
    segments: np.ndarray
    #: False for a group that is one record which could not merge (no date, blank key).
    mergeable: np.ndarray
    n_records: int
    #: Each group's first record in precedence (its most recently updated), ascending.
    top: np.ndarray = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "top", self.order[self.starts])

    @property
    def n_groups(self) -> int:
        return len(self.starts)

    def labels(self) -> np.ndarray:
        """The group number of every record position; -1 for excluded records."""
        labels = np.full(self.n_records, -1, dtype=np.int64)
        labels[self.order] = np.repeat(self.segments, self.sizes[self.segments])
        return labels

    def reduce(self, ufunc: np.ufunc, values: np.ndarray) -> np.ndarray:
        """`ufunc` folded over each group's values (e.g. np.minimum for the earliest)."""
        out = np.empty(self.n_groups, dtype=values.dtype)
        if self.n_groups:
            out[self.segments] = ufunc.reduceat(values[self.order], self.starts[self.segments])
        return out


def blank_mask(values: np.ndarray) -> np.ndarray:
    """C1's `is_blank` of every value, as a bool array (fast for strings)."""
    words = _BLANK_WORDS
    return np.fromiter(
        (v.strip().lower() in words if type(v) is str else is_blank(v) for v in values),
        dtype=bool,
        count=len(values),
    )


def normalize_party(value: str) -> str:
    """A counterparty's comparison form of C2.4: whitespace collapsed, case folded."""
    return " ".join(value.split()).casefold()


def nanos(series: pd.Series) -> np.ndarray:
    """A time column as int64 nanoseconds since the epoch, UTC, NAT where missing.

    Times without an offset are UTC (C1); other units than ns are converted."""
    dtype = series.dtype
    if not (isinstance(dtype, pd.DatetimeTZDtype) or dtype.kind == "M"):
        series = pd.to_datetime(series, utc=True)
    values = series.array
    if values.tz is None:
        values = values.tz_localize("UTC")
    return values.as_unit("ns").asi8


def group_records(
    frame: pd.DataFrame, by_source: bool = False, helper: Executor | None = None
) -> tuple[RecordArrays, Plan]:
    """Read the store's record frame and group its records as C2.4 says (separately
    per feed when `by_source`, C2.6). With a `helper` executor, the records are sorted
    there while this thread reads the other columns (numpy sorts release the GIL)."""
    vessel, port, commodity = (_codes(frame[c]) for c in ("vessel_key", "port_unlocode", "commodity_key"))
    eta, etb, etd = (nanos(frame[name]) for name in DATE_FIELDS)
    anchor = np.where(eta != NAT, eta, np.where(etb != NAT, etb, etd))
    excluded = (commodity.codes < 0) | _missing(frame["commodity"])
    source = _codes(frame["source_id"], sort=True) if by_source else None
    keys = _merge_keys([vessel, port, commodity] + ([source] if by_source else []))
    joinable = (keys >= 0) & (anchor != NAT) & ~excluded
    positions = np.flatnonzero(joinable)
    sort = _ChainSort(keys[positions], anchor[positions])
    sorted_by = _submit(helper, sort.argsort)
    arrays = RecordArrays(
        vessel=vessel,
        port=port,
        commodity=commodity,
        source=source or _codes(frame["source_id"], sort=True),
        counterparties={f: _party_codes(frame[f]) for f in COUNTERPARTY_FIELDS},
        anchor=anchor,
        updated=nanos(frame["updated_at"]),
        refs=_objects(frame["ref"]),
        excluded=excluded,
    )
    by = sorted_by.result()
    loners = np.flatnonzero(~excluded & ~joinable)
    return arrays, _plan(arrays, positions[by], sort.chains(by), loners)


def _plan(arrays: RecordArrays, positions: np.ndarray, chain: np.ndarray, loners: np.ndarray) -> Plan:
    """The Plan from the joinable records sorted into chains and the records that
    cannot merge (each a group of its own)."""
    label = _split_conflicting_chains(arrays, positions, chain)
    joined = int(label.max()) + 1 if len(label) else 0
    positions = np.concatenate([positions, loners])
    label = np.concatenate([label, np.arange(joined, joined + len(loners))])
    order, sizes = _by_precedence(arrays, positions, label, joined + len(loners))
    return _numbered_by_top(order, sizes, joined, len(arrays))


def _submit(helper: Executor | None, function, *args) -> Future:
    if helper is not None:
        return helper.submit(function, *args)
    done: Future = Future()
    done.set_result(function(*args))
    return done


def _numbered_by_top(order: np.ndarray, sizes: np.ndarray, joined: int, n_records: int) -> Plan:
    """The Plan of groups laid out one after another in `order`, renumbered in the
    order of their top records (see Plan); the first `joined` are mergeable."""
    starts = np.cumsum(sizes) - sizes
    by = np.argsort(order[starts], kind="stable")
    segments = np.empty(len(by), dtype=np.int64)
    segments[by] = np.arange(len(by))
    return Plan(order, starts[by], sizes[by], segments, by < joined, n_records)


def _objects(series: pd.Series) -> np.ndarray:
    if series.dtype == object:
        return series.to_numpy()
    return series.to_numpy(dtype=object, na_value=None)


def _missing(series: pd.Series) -> np.ndarray:
    """Where a column is null (a categorical's code -1; None/NaN otherwise)."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        return series.cat.codes.to_numpy() < 0
    return pd.isna(_objects(series))


def factorized(series: pd.Series, sort: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(int64 codes, object uniques) of a column, -1 for null. A categorical column
    (the store's text columns, `store.views.records`) gives its own codes and categories at
    no cost; `sort` then needs categories in ascending order, as the store makes
    them (otherwise they are sorted here)."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        categories = series.cat.categories
        codes = series.cat.codes.to_numpy().astype(np.int64)
        if sort and not categories.is_monotonic_increasing:
            order = np.argsort(np.asarray(categories, dtype=object), kind="stable")
            rank = np.empty(len(order), dtype=np.int64)
            rank[order] = np.arange(len(order))
            return np.append(rank, -1)[codes], np.asarray(categories, dtype=object)[order]
        return codes, np.asarray(categories, dtype=object)
    codes, uniques = pd.factorize(_objects(series), sort=sort)
    return codes, np.asarray(uniques, dtype=object)


def _codes(series: pd.Series, sort: bool = False) -> Codes:
    """Codes of a column. The store removes C1 blanks at ingest; any blank string left
    over (N/A, TBC, …) still counts as blank, found among the distinct values."""
    codes, uniques = factorized(series, sort)
    blank = blank_mask(uniques)
    if blank.any():
        codes = np.append(np.where(blank, -1, np.arange(len(uniques))), -1)[codes]
    return Codes(codes, uniques)


def _party_codes(series: pd.Series) -> Codes:
    raw = _codes(series)
    normal = [normalize_party(str(u)) for u in raw.uniques]
    to_normal, uniques = pd.factorize(np.array(normal, dtype=object))
    to_normal = np.append(to_normal, -1).astype(np.int32)
    return Codes(to_normal[raw.codes], np.asarray(uniques, dtype=object))


def _merge_keys(parts: list[Codes]) -> np.ndarray:
    """One int64 per record for the merge key's parts (vessel key, port, commodity key,
    and the feed under by_source), -1 when a part is blank."""
    keys = np.zeros(len(parts[0].codes), dtype=np.int64)
    span = 1
    for part in parts:
        size = len(part.uniques) + 1
        if span * size >= _INT64_ROOM:
            keys = pd.factorize(keys)[0].astype(np.int64)
            span = int(keys.max(initial=0)) + 1
        keys *= size
        keys += part.codes
        keys += 1
        span *= size
    blank = np.zeros(len(keys), dtype=bool)
    for part in parts:
        if len(part.uniques) and part.codes.min() < 0:
            blank |= part.codes < 0
    keys[blank] = -1
    return keys


class _ChainSort:
    """Sorting joinable records by (key, anchor) and cutting the order into chains: a
    chain ends at a new key or where the next anchor is over 7 days later. The sort is
    one numpy call, which releases the GIL, so that it can run on a helper thread."""

    def __init__(self, keys: np.ndarray, anchors: np.ndarray):
        if not len(keys):
            self.composite, self.keys, self.anchors, self.window = keys, keys, anchors, 0
            return
        anchors = anchors - anchors.min()
        unit = _SECOND if not (anchors % _SECOND).any() else 1
        if unit > 1:
            anchors //= unit
        self.window = WINDOW_NS // unit
        # Keys spaced wider than any anchor difference plus the window make one
        # difference of the sorted composite say both "new key" and "gap over 7 days".
        span = int(anchors.max()) + self.window + 1
        if (int(keys.max()) + 1) * span < _INT64_ROOM:
            self.composite, self.keys, self.anchors = keys * span + anchors, None, None
        else:
            self.composite, self.keys, self.anchors = None, keys, anchors

    def argsort(self) -> np.ndarray:
        """The sorting permutation."""
        if self.composite is not None:
            return np.argsort(self.composite)
        return np.lexsort((self.anchors, self.keys))

    def chains(self, by: np.ndarray) -> np.ndarray:
        """The chain number of each record in sorted order `by`."""
        if self.composite is not None:
            breaks = np.diff(self.composite[by]) > self.window
        else:
            keys, anchors = self.keys[by], self.anchors[by]
            breaks = (keys[1:] != keys[:-1]) | (np.diff(anchors) > self.window)
        chain = np.zeros(len(by), dtype=np.int64)
        np.cumsum(breaks, out=chain[1:])
        return chain


def _split_conflicting_chains(arrays, positions: np.ndarray, chain: np.ndarray) -> np.ndarray:
    """The group label of every sorted position: its chain's number for chains without
    a counterparty disagreement; for the others, the C2.4 replay's groups (the first
    keeps the chain's number, the others get new numbers after every chain's)."""
    if not len(positions):
        return chain
    starts = np.flatnonzero(np.concatenate([[True], chain[1:] != chain[:-1]]))
    conflict = np.zeros(len(starts), dtype=bool)
    parties = [arrays.counterparties[f].codes[positions] for f in COUNTERPARTY_FIELDS]
    for codes in parties:
        # Blank is -1: the lowest as int32, the highest as uint32.
        high = np.maximum.reduceat(codes, starts)
        low = np.minimum.reduceat(codes.view(np.uint32), starts)
        conflict |= (high >= 0) & (low < high.astype(np.uint32))
    where = np.flatnonzero(conflict[chain])
    if not len(where):
        return chain
    label = chain.copy()
    replay = _Replay(arrays, positions[where], [codes[where] for codes in parties])
    fresh = int(chain[-1]) + 1
    for span in np.split(np.arange(len(where)), np.flatnonzero(np.diff(chain[where])) + 1):
        sub = np.asarray(replay.groups(span), dtype=np.int64)
        extra = sub > 0
        label[where[span[extra]]] = fresh + sub[extra] - 1
        fresh += int(sub.max())
    return label


class _Replay:
    """C2.4 record by record, for chains with a counterparty disagreement."""

    def __init__(self, arrays: RecordArrays, rows: np.ndarray, parties: list[np.ndarray]):
        self.anchor = arrays.anchor[rows].tolist()
        self.updated = arrays.updated[rows].tolist()
        self.source = arrays.source.codes[rows].tolist()
        self.ref = [str(r) for r in arrays.refs[rows]]
        self.parties = list(zip(*(p.tolist() for p in parties)))

    def groups(self, span: np.ndarray) -> list[int]:
        """The group number of each record of one chain (`span` indexes this replay)."""
        items = sorted(
            span.tolist(),
            key=lambda i: (self.anchor[i], self.updated[i], self.source[i], self.ref[i]),
        )
        latest: list[int] = []  # per group, its latest anchor
        values: list[list[int]] = []  # per group, its counterparty codes (-1 blank)
        result = dict.fromkeys(items, 0)
        for i in items:
            anchor, mine = self.anchor[i], self.parties[i]
            best = -1
            for g, theirs in enumerate(values):
                if anchor - latest[g] > WINDOW_NS or _disagree(theirs, mine):
                    continue
                if best < 0 or latest[g] > latest[best]:
                    best = g
            if best < 0:
                best = len(values)
                latest.append(anchor)
                values.append(list(mine))
            else:
                latest[best] = anchor  # items come in anchor order
                values[best] = [t if t >= 0 else m for t, m in zip(values[best], mine)]
            result[i] = best
        return [result[i] for i in span.tolist()]


def _disagree(theirs, mine) -> bool:
    return any(t >= 0 and m >= 0 and t != m for t, m in zip(theirs, mine))


def _by_precedence(arrays: RecordArrays, positions: np.ndarray, label: np.ndarray, n_groups: int):
    """`positions` reordered group by group (labels ascending), each group in C2.5
    precedence; and the size of each group. Labels mostly ascend along `positions`
    already, which the stable sort exploits."""
    sizes = np.bincount(label, minlength=n_groups)
    if not len(positions):
        return positions, sizes
    rank, span = _precedence_rank(arrays)
    rank = rank[positions]
    if n_groups * span < _INT64_ROOM:
        key = label * span + rank
        by = np.argsort(key, kind="stable")
        key = key[by]
    else:
        by = np.lexsort((rank, label))
        key = np.column_stack([label[by], rank[by]])
    order = positions[by]
    _order_ties(order, key, arrays)
    return order, sizes


def _precedence_rank(arrays: RecordArrays) -> tuple[np.ndarray, int]:
    """Per record, an int64 that orders a group's records as C2.5 does, to the second
    (latest updated_at first, then source_id); and its span. Records whose rank ties
    are ordered exactly by `_order_ties`."""
    updated = arrays.updated
    seen = updated != NAT
    seconds = updated // _SECOND
    newest = int(seconds.max()) if seen.any() else 0
    oldest = int(seconds[seen].min()) if seen.any() else 0
    age = newest - seconds
    age[~seen] = newest - oldest + 1
    n_sources = len(arrays.source.uniques) + 1
    age *= n_sources
    age += arrays.source.codes
    return age, (newest - oldest + 2) * n_sources


def _order_ties(order: np.ndarray, key: np.ndarray, arrays: RecordArrays) -> None:
    """Within runs of equal sort key, order exactly by C2.5: updated_at descending,
    then source_id, then ref, ascending. In place."""
    same = key[1:] == key[:-1]
    if same.ndim > 1:
        same = same.all(axis=1)
    if not same.any():
        return
    edges = np.diff(np.concatenate([[0], same.astype(np.int8), [0]]))
    for begin, end in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) + 1):
        run = order[begin:end].tolist()
        run.sort(key=lambda r: (-int(arrays.updated[r]), int(arrays.source.codes[r]), str(arrays.refs[r])))
        order[begin:end] = run
