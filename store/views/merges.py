"""The merges of the views brought up to date in one transaction (issue 15), and
which records they take: `store.views.upkeep` asks for the rows of a view, whole or
of some (vessel key, port) pairs, and for an `all` view the pairs widened by issue
19's rule 1 (`Merges.widened`); loads and lookups are shared between the views of the
transaction.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
from store.frames import pd
from sqlalchemy.orm import Session

from store.database.schema import MergedView, Record
from store.merging import columns, merge
from store.views.records import identity_rows, load_records, load_records_where, name_ports, names_carried
from store.merging.resolve import Identities
from store.views.stored import of_pairs, pair_chunks

Pair = tuple[str, str]


class Merges:
    """The merges of the views brought up to date in one transaction, sharing the
    work: each feed's records are loaded once (all of them, per feed; or those of
    the pairs asked, for every feed of the transaction's views at once, so that views
    whose widened pairs differ load only the pairs no view asked before), however
    many views hold the feed. The index lookups of the widening (`widened`) are
    shared the same way: read once per key for every feed, then kept to each view's
    feeds."""

    def __init__(self, session: Session, feeds: Iterable[str] = ()):
        self.session = session
        #: feed id -> all its records
        self._records: dict[str, pd.DataFrame] = {}
        #: The records of the pairs in `_pairs` of every feed in `_feeds`, in parts,
        #: and the lookups (`_lookup`) of every feed in `_feeds`.
        self._feeds: set[str] = set(feeds)
        self._pairs: set[Pair] = set()
        self._parts: list[pd.DataFrame] = []
        self._lookups: dict[str, dict[str, list[tuple]]] = {}
        #: name key -> {IMO key: bit mask of the feeds that give it (`_bit`)}, from the
        #: `identity_rows` lookups
        self._identity_index: dict[str, dict[str, int]] = {}
        self._bits: dict[str, int] = {}
        #: Rows of `merged_rows` the transaction's upkeep deleted or inserted
        #: (`store.views.upkeep`): what the vacuum after its commit counts.
        self.written = 0

    def rows(
        self, view: MergedView, pairs: frozenset[Pair] | None = None, identities: Identities | None = None,
        sources: frozenset[str] | None = None,
    ) -> pd.DataFrame:
        """The merged rows of `view` from the current records: all of them, or only
        those of the (vessel key, port) `pairs`, resolved with `identities` (issue 19
        rule 1: the whole view's, when only some pairs are merged); of the `by_source`
        view, only the rows of the feeds `sources` when given (each feed's rows are
        its own merge, C2.6)."""
        feeds = [f for f in view.feeds if sources is None or f in sources]
        if view.mode == "all":
            return merge.merge(self._records_in(feeds, pairs), "all", identities)
        records = [r for _, r in self._records_of(feeds, pairs) if len(r)]
        if not records:
            return merge.merge(load_records(self.session, []), view.mode)
        return columns.concat([merge.merge(r, "by_source") for r in records])

    def widened(self, view: MergedView, touched: set[Pair]) -> tuple[set[Pair], frozenset[Pair], Identities]:
        """For an `all` view (issue 19 rule 1, rule 5): the pairs whose rows to replace,
        the pairs whose records to merge for them, and the identities those records
        are resolved with (those of the whole view for every name among them).

        A name-only record's vessel key depends on which IMO numbers its name carries
        among the view's records, and only a change that makes or breaks such a link
        changes that (ingest notes a `link`, before and after). So a touched
        name-only pair (N, port) of a name no link moved replaces its rows and, when
        N carries one IMO number (rule 1 resolves it), that number's at the port (a
        name that carries several resolves to none: its records stay under N; the
        bench's names carry up to 46 numbers at 1,000,000 records, and replacing
        them all made a daily update merge again 2,164 rows of its largest view
        instead of 1,944); a linked name N moves every name-only record of N, at
        every port where N has such records, between the key N and the IMO keys N
        carries now or carried before (those it carries now, or the one linked).
        Rows keyed by an IMO hold the name-only records resolved to it: those are
        merged with them, and the identities read are those of the names that have
        name-only records at the ports of such rows (no other name is resolved).
        Every lookup goes by index (`records.name_key`, `records.vessel_key`)."""
        names: dict[str, set[str]] = {}
        linked: dict[str, set[str]] = {}
        for vessel, port in touched:
            if port is None:  # a link (`link`)
                imo, name = link_parts(vessel)
                linked.setdefault(name, set()).add(imo)
                names.setdefault(name, set())
            elif vessel.startswith("NAME:"):
                names.setdefault(vessel, set()).add(port)
        identities = self._identities(view.feeds, names)
        replaced = {(vessel, port) for vessel, port in touched if port is not None}
        for name, ports in self._name_ports(view.feeds, sorted(linked)).items():
            names[name] |= ports
        for name, ports in names.items():
            imos = identities.imos(name)
            if name in linked:  # before the change it may have resolved to any of them
                candidates = set(imos) | linked[name]
            else:  # no link moved: its records are where it resolves now, and were
                candidates = set(imos) if len(imos) == 1 else set()
            for port in ports:
                replaced.add((name, port))
                replaced.update((imo, port) for imo in candidates)
        identities = self._identities(view.feeds, set(names) | self._resolving(view, replaced, set(names)))
        names_of = identities.names_of()
        loaded = set(replaced)
        for vessel, port in replaced:
            loaded.update((name, port) for name in names_of.get(vessel, ()))
        return replaced, frozenset(loaded), identities

    def _resolving(self, view: MergedView, replaced: set[Pair], known: set[str]) -> set[str]:
        """The names (other than `known`) that may resolve to the IMO key of a
        `replaced` pair: the names that the records of that IMO number carry and that
        have name-only records at that pair's port (no other name-only record can join
        the pair's rows)."""
        ports: dict[str, set[str]] = {}
        for vessel, port in replaced:
            if vessel.startswith("IMO"):
                ports.setdefault(vessel, set()).add(port)
        carried = {(imo, name) for imo, name, _ in self._lookup(names_carried, view.feeds, ports) if name not in known}
        at = self._name_ports(view.feeds, {name for _, name in carried})
        return {name for imo, name in carried if at.get(name, set()) & ports[imo]}

    def _identities(self, feed_ids: Sequence[str], names: Iterable[str]) -> Identities:
        """Rule 1's identities among the served records of `feed_ids` of the name keys
        `names` (as `store.views.records.load_identities`, without the names of the
        feeds that give each IMO number: only provenance shows those, and it reads its
        own). The rows read for a name (one per IMO number and feed: ~160 a name in
        the bench's daily update) are kept once per transaction as {IMO key: a bit mask
        of the feeds}, so that each view keeps its feeds of a (name, IMO) entry with one
        AND: the bench's names carry up to 46 IMO numbers, and a daily update's views
        went over ~29,000 entries each (as sets of feeds, ~0.2 s of the update)."""
        names = set(names)
        cache = self._read(identity_rows, feed_ids, names)
        for name in names - self._identity_index.keys():
            imos: dict[str, int] = {}
            for _, imo, feed_id in cache[name]:
                if isinstance(imo, str) and imo.startswith("IMO"):
                    imos[imo] = imos.get(imo, 0) | self._bit(feed_id)
            self._identity_index[name] = imos
        wanted = 0
        for feed_id in feed_ids:
            wanted |= self._bit(feed_id)
        out: dict[str, dict[str, tuple[str, ...]]] = {}
        for name in names:
            given = {imo: () for imo, feeds in self._identity_index[name].items() if feeds & wanted}
            if given:
                out[name] = given
        return Identities(out)

    def _bit(self, feed_id: str) -> int:
        """The feed's bit in the masks of `_identity_index`."""
        bit = self._bits.get(feed_id)
        if bit is None:
            bit = self._bits[feed_id] = 1 << len(self._bits)
        return bit

    def _name_ports(self, feed_ids: Sequence[str], names: Iterable[str]) -> dict[str, set[str]]:
        """{name key: the ports where the feeds have served records under that key}."""
        out: dict[str, set[str]] = {}
        for name, port, _ in self._lookup(name_ports, feed_ids, names):
            out.setdefault(name, set()).add(port)
        return out

    def _lookup(self, read, feed_ids: Sequence[str], keys: Iterable[str]) -> list[tuple]:
        """The rows `(key, value, feed id)` that `read(session, feeds, keys)` gives for
        `keys` among the records of `feed_ids`: each key read once for every feed of
        the transaction's views (the views ask for the same keys, each among its own
        feeds), then kept to `feed_ids`."""
        keys = set(keys)
        cache = self._read(read, feed_ids, keys)
        wanted = set(feed_ids)
        return [row for key in keys for row in cache[key] if row[2] in wanted]

    def _read(self, read, feed_ids: Sequence[str], keys: set[str]) -> dict[str, list[tuple]]:
        """{key: rows} of `read` for every feed known, with `keys` among them."""
        self._know(feed_ids)
        cache = self._lookups.setdefault(read.__name__, {})
        missing = keys - cache.keys()
        if missing:
            for key in missing:
                cache[key] = []
            for row in read(self.session, sorted(self._feeds), missing):
                cache[row[0]].append(tuple(row))
        return cache

    def _know(self, feed_ids: Sequence[str]) -> None:
        """Make `feed_ids` among the feeds that loads and lookups cover (starting
        them over when one was not)."""
        if not self._feeds.issuperset(feed_ids):
            self._feeds.update(feed_ids)
            self._pairs, self._parts, self._lookups, self._identity_index = set(), [], {}, {}

    def _records_of(self, feeds: Sequence[str], pairs: frozenset[Pair] | None) -> list[tuple[str, pd.DataFrame]]:
        """Per feed of `feeds`, its records (of the `pairs`, when given)."""
        if pairs is None:
            missing = [f for f in feeds if f not in self._records]
            if missing:
                records = load_records(self.session, missing)
                source = records["source_id"].astype(object).to_numpy()
                for feed_id in missing:
                    self._records[feed_id] = records[source == feed_id].reset_index(drop=True)
            return [(f, self._records[f]) for f in feeds]
        frame, wanted, source = self._of_pairs(feeds, pairs)
        return [(f, frame[wanted & (source == f)].reset_index(drop=True)) for f in feeds]

    def _records_in(self, feeds: Sequence[str], pairs: frozenset[Pair] | None) -> pd.DataFrame:
        """The records of `feeds` (of the `pairs`, when given) in one frame: an `all`
        view's, taken from the loaded records with one mask instead of a frame per
        feed joined again (in a daily update at 1,000,000 records, twenty slices and
        a join of them for each of its views); with none, the empty merge input."""
        if pairs is None:
            parts = [r for _, r in self._records_of(feeds, None)]
        else:
            frame, wanted, source = self._of_pairs(feeds, pairs)
            parts = [frame[wanted & np.isin(source, list(feeds))].reset_index(drop=True)]
        parts = [r for r in parts if len(r)]
        return columns.concat(parts) if parts else load_records(self.session, [])

    def _of_pairs(self, feeds: Sequence[str], pairs: frozenset[Pair]) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
        """The loaded records (of every feed known), loading the `pairs` not loaded
        yet: (the records, which are of the `pairs`, each one's feed)."""
        self._load_pairs(feeds, pairs)
        frame = self._parts[0] if len(self._parts) == 1 else columns.concat(self._parts)
        self._parts = [frame]
        source = frame["source_id"].astype(object).to_numpy()
        keys = pd.MultiIndex.from_arrays([frame["vessel_key"].astype(object), frame["port_unlocode"].astype(object)])
        return frame, np.asarray(keys.isin(list(pairs))), source

    def _load_pairs(self, feeds: Sequence[str], pairs: frozenset[Pair]) -> None:
        """Load the records of the pairs not loaded yet, for every feed known."""
        self._know(feeds)
        needed = sorted(pairs - self._pairs)
        if needed or not self._parts:
            # One statement per chunk: OR-ed into one, a large change (a new feed set
            # derived from a near view at 1,000,000 records) passed SQLite's limit of
            # 32,766 parameters.
            feeds = sorted(self._feeds)
            dialect = self.session.get_bind().dialect.name
            pairs_in = lambda chunk: of_pairs(Record.vessel_key, Record.port_unlocode, chunk, dialect)  # noqa: E731
            self._parts += [load_records_where(self.session, feeds, [pairs_in(c)]) for c in pair_chunks(needed)] or [
                load_records_where(self.session, feeds, [])
            ]
            self._pairs.update(needed)


def link_parts(entry: str) -> tuple[str, str]:
    """(IMO key, name key) of a change-log link (`store.views.changelog.link`)."""
    imo, name = entry.removeprefix("LINK:").split(":", 1)
    return imo, "NAME:" + name
