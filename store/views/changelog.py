"""The change log of kept views (issue 15): which (vessel key, port) pairs each change
of a feed's records touched, per version of the feed's data (table `vessel_changes`).

Whatever changes records bumps the feed's `data_version` and notes, in the same
transaction, the pairs it touched, before and after the change (`note_changes`), and
the IMO-name links it made or broke (`link`, issue 19 rule 5). A view whose versions
are behind its feeds' then merges again only those pairs (`touched`;
`store.views.upkeep`); a change too large to list, or a log that does not reach back
to the view's versions, says "everything" (None), and the view is merged afresh.
Entries every view of the feed has seen are forgotten (`prune_log`).
"""

from __future__ import annotations

from typing import Iterable

from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session

from store.database.schema import MergedView, VesselChange
from store.views.merges import Pair

#: Pairs listed per change of a feed; a larger change is noted as "everything".
LISTED_PAIRS = 20_000


def note_changes(session: Session, feed_id: str, version: int, pairs: Iterable[tuple[str | None, str]]) -> None:
    """Note that the change making `feed_id`'s data `version` touched the records of
    the (vessel key, port) `pairs` (before and after the change). Every change that
    bumps a feed's `data_version` calls this in the same transaction."""
    touched = {(vessel or "", port) for vessel, port in pairs}
    if len(touched) > LISTED_PAIRS:  # "everything": views of the feed are merged afresh
        touched = {(None, None)}
    ordered = sorted(touched, key=lambda pair: (pair[0] or "", pair[1] or ""))
    rows = [{"feed_id": feed_id, "version": version, "vessel_key": v, "port_unlocode": p} for v, p in ordered]
    if not rows:  # the version moved but touched nothing: the log stays complete
        rows = [{"feed_id": feed_id, "version": version, "vessel_key": "", "port_unlocode": None}]
    session.execute(insert(VesselChange), rows)


def link(imo_key: str, name_key: str) -> tuple[str, None]:
    """The change-log entry "a record with IMO `imo_key` is named `name_key`" (issue 19
    rule 5), noted beside the pairs by a change of such a record, before and after:
    a `LINK:` vessel key without a port (it fits: names are at most 200 characters)."""
    return f"LINK:{imo_key}:{name_key.removeprefix('NAME:')}", None


def touched(session: Session, view: MergedView, current: dict[str, int]) -> set[Pair] | None:
    """The (vessel key, port) pairs changed in the view's feeds since its versions;
    None when that is not known (a feed new to the view, a change too large to list,
    a log that does not reach back), so that the view must be merged afresh."""
    pairs: set[Pair] = set()
    for feed_id in view.feeds:
        changed = feed_touched(session, feed_id, view.versions.get(feed_id), current.get(feed_id))
        if changed is None:
            return None
        pairs |= changed
    return pairs


def feed_touched(session: Session, feed_id: str, since: int | None, now: int | None) -> set[Pair] | None:
    """The pairs (and links) the changes of `feed_id` after version `since` up to
    `now` touched; None when that is not known."""
    if since is None or now is None:
        return None
    if since == now:
        return set()
    rows = session.execute(
        select(VesselChange.version, VesselChange.vessel_key, VesselChange.port_unlocode).where(
            VesselChange.feed_id == feed_id, VesselChange.version > since, VesselChange.version <= now
        )
    ).all()
    if {version for version, _, _ in rows} != set(range(since + 1, now + 1)):
        return None
    pairs: set[Pair] = set()
    for _, vessel, port in rows:
        if vessel is None:
            return None
        if port is not None or vessel.startswith("LINK:"):
            pairs.add((vessel, port))
    return pairs


def prune_log(session: Session, feed_ids: Iterable[str]) -> None:
    """Forget changes that every view of the feed already reflects."""
    views = session.execute(select(MergedView.feeds, MergedView.versions)).all()
    for feed_id in feed_ids:
        seen = [versions.get(feed_id, 0) for feeds, versions in views if feed_id in feeds]
        floor = min(seen) if seen else None
        clause = VesselChange.feed_id == feed_id
        if floor is not None:
            clause = clause & (VesselChange.version <= floor)
        session.execute(delete(VesselChange).where(clause))
