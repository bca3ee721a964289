"""Which vessel a record is, and how specific its commodity is (C2.2 as amended by
issue 19). Runs before the grouping of `merge=all` (`store.merging.merge`); `merge=by_source`
does not use it (issue 19 rule 3).

Rule 1, vessel identity. A record with an IMO number is that IMO. A record with
only a name is merged as an IMO when its normalised name (C2.2) is the name of records
with exactly one IMO number *among the records being merged*: the visible feeds of
the buyer, never the whole store. A name that several IMO numbers carry stays a name.
`Identities` holds those names and numbers; `Identities.of_records` reads them from the
merge input, `store.views.records.load_identities` from the store (for the upkeep of
a view, which merges only part of its records but must resolve them as the whole).

Rule 2, commodity specificity. A record whose leaf is its subgroup's "(Unspecified)"
leaf takes the specific leaf of that subgroup when, among the records of the same
(resolved) vessel and port whose anchors lie within 7×24 h of its own, exactly one
specific leaf of the subgroup occurs. It is then grouped (C2.4) and shown (C2.5) as a
record of that leaf. Two specific leaves never merge; with two specific candidates the
record keeps its own leaf.

Both are vectorised: rule 1 works on the distinct (name, IMO) pairs, rule 2 sorts the
specific records once and finds each unspecified record's window by binary search.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import numpy as np
from store.frames import pd

from store.normalize import name_key
from store.merging.merge_plan import NAT, WINDOW_NS, _codes, _merge_keys, _missing, factorized, nanos
from store.fields import DATE_FIELDS
from store.reference.taxonomy import default_taxonomy

#: The columns rule 2 changes on a record that takes a specific leaf.
COMMODITY_COLUMNS = ("commodity_key", "commodity_normalized", "commodity_normalized_subgroup", "commodity_normalized_group")
_INT64_ROOM = 2**62
_SECOND = 10**9


@dataclass(frozen=True)
class Identities:
    """Per normalised name key (`NAME:…`), the IMO keys (`IMO…`) of the records with
    that name and an IMO number, each with the names of the feeds that gave it."""

    names: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)

    @classmethod
    def of_triples(cls, triples: Iterable[tuple[object, object, object]]) -> "Identities":
        """From (vessel_name, vessel_key, source_name) of records with an IMO number."""
        names: dict[str, dict[str, set[str]]] = {}
        for name, key, source in triples:
            if not isinstance(name, str) or not isinstance(key, str) or not key.startswith("IMO"):
                continue
            normal = name_key(name)
            if normal:
                names.setdefault(normal, {}).setdefault(key, set()).add(str(source))
        return cls({n: {k: tuple(sorted(s)) for k, s in imos.items()} for n, imos in names.items()})

    @classmethod
    def of_keys(cls, triples: Iterable[tuple[object, object, object]]) -> "Identities":
        """From (name key, vessel_key, source_name) of records with an IMO number, the
        name key already normalised (`name_key`, as the store keeps it)."""
        names: dict[str, dict[str, set[str]]] = {}
        for name, key, source in triples:
            if isinstance(name, str) and isinstance(key, str) and key.startswith("IMO"):
                names.setdefault(name, {}).setdefault(key, set()).add(str(source))
        return cls({n: {k: tuple(sorted(s)) for k, s in imos.items()} for n, imos in names.items()})

    @classmethod
    def of_records(cls, records: pd.DataFrame, feeds: bool = False) -> "Identities":
        """The identities among `records` (a merge input frame), served records only,
        of the names that `records` also carry without an IMO (the only ones rule 1
        can use); with the names of the feeds that give each IMO when `feeds`."""
        links = _Links.of(records) if len(records) else None
        if links is None:
            return cls()
        key_list = links.keys.tolist()
        out: dict[str, dict[str, tuple[str, ...]]] = {}
        for n, k in zip(*(part.tolist() for part in np.divmod(links.matched, links.width))):
            out.setdefault(key_list[n], {})[key_list[k]] = ()
        if feeds and out:
            rows = links.rows
            names_arr = np.append(np.asarray(links.names, dtype=object), None)
            keys_arr = np.append(np.asarray(links.keys, dtype=object), None)
            sources = np.asarray(records["source_name"].astype(object), dtype=object)
            triples = zip(names_arr[links.name_codes[rows]], keys_arr[links.key_codes[rows]], sources[rows])
            return cls({n: imos for n, imos in cls.of_triples(triples).names.items() if n in out})
        return cls(out)

    def resolved(self) -> dict[str, str]:
        """{name key: IMO key} for the names that exactly one IMO number carries."""
        return {name: next(iter(imos)) for name, imos in self.names.items() if len(imos) == 1}

    def imos(self, name: str) -> tuple[str, ...]:
        """The IMO keys that records named `name` (a `NAME:` key) carry."""
        return tuple(sorted(self.names.get(name, {})))

    def feeds(self, name: str, imo: str) -> tuple[str, ...]:
        """The names of the feeds that give IMO key `imo` to name key `name`."""
        return self.names.get(name, {}).get(imo, ())

    def names_of(self) -> dict[str, set[str]]:
        """{IMO key: the name keys resolved to it} (rule 1's map, reversed)."""
        out: dict[str, set[str]] = {}
        for name, imo in self.resolved().items():
            out.setdefault(imo, set()).add(name)
        return out


@dataclass(frozen=True)
class Resolution:
    """The merge input with rules 1 and 2 applied (`frame`), and which records they
    changed: `vessel_from` (the record's own vessel key, where rule 1 replaced it) and
    `commodity_from` (its own leaf id, where rule 2 replaced it), both on
    `frame.index`, None where nothing changed."""

    frame: pd.DataFrame
    vessel_from: pd.Series
    commodity_from: pd.Series
    identities: Identities


def resolve(records: pd.DataFrame, identities: Identities | None = None) -> Resolution:
    """Rules 1 and 2 over `records`. `identities` are those of the whole merge input
    when `records` is only part of it (default: read from `records`)."""
    out = records.copy(deep=False)
    none = pd.Series(None, index=records.index, dtype=object)
    if not len(records):
        return Resolution(out, none, none.copy(), identities or Identities())
    if identities is None:  # the whole merge input: worked out on its codes
        vessel_from = _resolve_own_vessels(out)
        identities = Identities()
    else:
        vessel_from = _resolve_vessels(out, identities.resolved())
    commodity_from = _resolve_commodities(out)
    return Resolution(out, _series(vessel_from, records.index), _series(commodity_from, records.index), identities)


def _series(values: np.ndarray | None, index) -> pd.Series:
    if values is None:
        return pd.Series(None, index=index, dtype=object)
    return pd.Series(values, index=index, dtype=object)


@dataclass(frozen=True)
class _Links:
    """The (name key, IMO key) pairs that a frame's served records with an IMO number
    make, on the codes of the frame's own vessel keys, kept only for names that some
    name-only record of the frame carries (rule 1 has no use for the others): what
    `Identities.of_records` and `_resolve_own_vessels` both start from."""

    key_codes: np.ndarray
    keys: np.ndarray
    rows: np.ndarray  # the served records with an IMO number
    name_codes: np.ndarray
    names: np.ndarray
    matched: np.ndarray  # name key code * width + IMO key code, distinct
    width: int

    @classmethod
    def of(cls, frame: pd.DataFrame) -> "_Links | None":
        key_codes, keys = factorized(frame["vessel_key"])
        key_list = keys.tolist()
        kinds = [k[:4] if isinstance(k, str) else "" for k in key_list]
        is_imo = np.array([k[:3] == "IMO" for k in kinds] + [False], dtype=bool)
        position = {k: i for i, (k, kind) in enumerate(zip(key_list, kinds)) if kind == "NAME"}
        rows = np.flatnonzero(is_imo[key_codes] & ~_missing(frame["commodity"]))
        if not len(rows) or not position:
            return None
        name_codes, names = factorized(frame["vessel_name"])
        width = len(keys) + 1
        pairs = pd.unique(name_codes[rows] * width + key_codes[rows])
        name_of, key_of = np.divmod(pairs, width)
        found = name_of >= 0
        name_of, key_of = name_of[found], key_of[found]
        # Each distinct name once: the code of its name key among the vessel keys
        # (-1: no name-only record has it).
        distinct = np.unique(name_of)
        target = np.full(len(names) + 1, -1, dtype=np.int64)
        target[distinct] = [position.get(name_key(names[c]), -1) for c in distinct.tolist()]
        name_of = target[name_of]
        useful = name_of >= 0
        matched = np.unique(name_of[useful] * width + key_of[useful])
        return cls(key_codes, keys, rows, name_codes, names, matched, width)


def _resolve_own_vessels(frame: pd.DataFrame) -> np.ndarray | None:
    """Rule 1 in place on `frame["vessel_key"]` with the identities of `frame` itself
    (as `Identities.of_records`, on codes: the IMO keys are among the frame's own
    keys); the replaced keys (None elsewhere)."""
    links = _Links.of(frame)
    if links is None:
        return None
    key_codes, keys = links.key_codes, links.keys
    name_of, imo_of = np.divmod(links.matched, links.width)
    named, first, count = np.unique(name_of, return_index=True, return_counts=True)
    single = count == 1
    if not single.any():
        return None
    to_new = np.append(np.arange(len(keys), dtype=np.int64), -1)
    to_new[named[single]] = imo_of[first[single]]
    new_codes = to_new[key_codes]
    changed = new_codes != key_codes
    frame["vessel_key"] = pd.Categorical.from_codes(new_codes, categories=pd.Index(keys, dtype=object))
    before = np.full(len(frame), None, dtype=object)
    before[changed] = keys[key_codes[changed]]
    return before


def _resolve_vessels(frame: pd.DataFrame, resolved: dict[str, str]) -> np.ndarray | None:
    """Rule 1 in place on `frame["vessel_key"]`; the replaced keys (None elsewhere)."""
    if not resolved:
        return None
    codes, uniques = factorized(frame["vessel_key"])
    targets = [resolved.get(u) if isinstance(u, str) else None for u in uniques]
    if not any(targets):
        return None
    categories = list(dict.fromkeys([*uniques, *(t for t in targets if t)]))
    position = {c: i for i, c in enumerate(categories)}
    to_new = np.array([position[t or u] for u, t in zip(uniques, targets)] + [-1], dtype=np.int64)
    new_codes = to_new[codes]
    changed = np.array([t is not None for t in targets] + [False], dtype=bool)[codes]
    frame["vessel_key"] = pd.Categorical.from_codes(new_codes, categories=pd.Index(categories, dtype=object))
    before = np.full(len(frame), None, dtype=object)
    before[changed] = np.asarray(uniques, dtype=object)[codes[changed]]
    return before


def _resolve_commodities(frame: pd.DataFrame) -> np.ndarray | None:
    """Rule 2 in place on the commodity columns; the replaced leaf ids (None elsewhere)."""
    commodity = _codes(frame["commodity_key"])
    taxonomy = default_taxonomy()
    subgroup_of, unspecified = [], []
    for key in commodity.uniques:
        leaf = _leaf(taxonomy, key)
        subgroup_of.append(f"{leaf.group}/{leaf.subgroup}" if leaf else None)
        unspecified.append(bool(leaf) and leaf.name.endswith("(Unspecified)"))
    with_unspecified = {s for s, u in zip(subgroup_of, unspecified) if u}
    if not with_unspecified:
        return None
    sub_codes, sub_names = pd.factorize(np.array([s if s in with_unspecified else None for s in subgroup_of] + [None], dtype=object))
    record_sub = sub_codes[commodity.codes]  # -1: no subgroup with an unspecified leaf
    is_unspecified = np.append(np.array(unspecified, dtype=bool), False)[commodity.codes]
    eta, etb, etd = (nanos(frame[name]) for name in DATE_FIELDS)
    anchor = np.where(eta != NAT, eta, np.where(etb != NAT, etb, etd))
    # The store's vessel keys are never blank words (they carry a prefix): codes as read.
    vessel, port = _Sub(*factorized(frame["vessel_key"])), _codes(frame["port_unlocode"])
    keys = _merge_keys([vessel, port, _Sub(record_sub, sub_names)])
    ok = (keys >= 0) & (anchor != NAT) & (record_sub >= 0) & ~_missing(frame["commodity"])
    loose = np.flatnonzero(ok & is_unspecified)
    specific = np.flatnonzero(ok & ~is_unspecified)
    if not len(loose) or not len(specific):
        return None
    specific = specific[np.isin(keys[specific], keys[loose])]
    if not len(specific):
        return None
    # Keys ranked densely, anchors relative and shifted by the window: one int64 sorts
    # by (key, anchor) and the window [a - 7 d, a + 7 d] never reaches another key.
    rank = np.unique(keys[specific], return_inverse=True)[1].reshape(-1)
    lookup = dict(zip(keys[specific].tolist(), rank.tolist()))
    loose = loose[np.isin(keys[loose], keys[specific])]
    if not len(loose):
        return None
    loose_rank = np.array([lookup[k] for k in keys[loose].tolist()], dtype=np.int64)
    base = int(min(anchor[specific].min(), anchor[loose].min()))
    rel_s, rel_l = anchor[specific] - base, anchor[loose] - base
    window = WINDOW_NS
    if not (rel_s % _SECOND).any() and not (rel_l % _SECOND).any():  # whole seconds: a narrower int64
        rel_s, rel_l, window = rel_s // _SECOND, rel_l // _SECOND, WINDOW_NS // _SECOND
    rel_s, rel_l = rel_s + window, rel_l + window
    span = int(max(rel_s.max(), rel_l.max())) + window + 1
    if (int(rank.max()) + 1) * span < _INT64_ROOM:
        composite = rank * span + rel_s
        order = np.argsort(composite, kind="stable")
        sorted_composite = composite[order]
        lo = np.searchsorted(sorted_composite, loose_rank * span + rel_l - window, "left")
        hi = np.searchsorted(sorted_composite, loose_rank * span + rel_l + window, "right")
    else:  # anchors too far apart for one int64: per key (rare)
        order = np.lexsort((rel_s, rank))
        r, a = rank[order], rel_s[order]
        lo, hi = np.empty(len(loose), dtype=np.int64), np.empty(len(loose), dtype=np.int64)
        for i, (k, x) in enumerate(zip(loose_rank.tolist(), rel_l.tolist())):
            first, last = np.searchsorted(r, k, "left"), np.searchsorted(r, k, "right")
            lo[i] = first + np.searchsorted(a[first:last], x - window, "left")
            hi[i] = first + np.searchsorted(a[first:last], x + window, "right")
    leaf = np.append(commodity.codes[specific[order]], 0)
    found = lo < hi
    bounds = np.column_stack([lo, hi]).reshape(-1)
    bounds = np.minimum(bounds, len(leaf) - 1)
    low = np.minimum.reduceat(leaf, bounds)[::2]
    high = np.maximum.reduceat(leaf, bounds)[::2]
    takes = found & (low == high)
    if not takes.any():
        return None
    rows = loose[takes]
    donors = specific[order][lo[takes]]
    before = np.full(len(frame), None, dtype=object)
    before[rows] = np.asarray(commodity.uniques, dtype=object)[commodity.codes[rows]]
    for name in COMMODITY_COLUMNS:
        frame[name] = _copied(frame[name], rows, donors)
    return before


@dataclass(frozen=True)
class _Sub:
    """A record's subgroup as a `Codes`-like part of a merge key."""

    codes: np.ndarray
    uniques: np.ndarray


def _copied(column: pd.Series, rows: np.ndarray, donors: np.ndarray) -> pd.Series:
    """`column` with the values at `donors` copied to `rows`."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        codes = column.cat.codes.to_numpy().copy()
        codes[rows] = codes[donors]
        return pd.Series(pd.Categorical.from_codes(codes, dtype=column.dtype), index=column.index)
    values = column.to_numpy(dtype=object, copy=True)
    values[rows] = values[donors]
    return pd.Series(values, index=column.index, dtype=column.dtype if column.dtype == object else object)


def _leaf(taxonomy, key):
    if not isinstance(key, str) or key.startswith("raw:"):
        return None
    try:
        return taxonomy.leaf(key)
    except KeyError:
        return None
