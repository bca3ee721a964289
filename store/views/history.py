"""The history of a record: every version an ingest ever stored (issue 2, "nothing is
ever lost").

Each ingest that changes a record moves its previous content into `record_revisions`
(with the version number, its `updated_at`, and `replaced_at`, the time it was
replaced) and bumps the record's `version`. Reading the revisions in version order and
appending the current row gives the whole history; the ETAs along it say how much a
call slipped. Functions take a session and neither commit nor close it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Iterable

from sqlalchemy import select, tuple_
from sqlalchemy.orm import Session

from store.errors import NotFound
from store.fields import content_json, format_time, parse_time
from store.database.schema import Record, RecordRevision

#: (feed id, ref): how a feed names its record, and the key of `eta_slips`.
RecordKey = tuple[str, str]

# Enough keys per IN list to keep round trips few, few enough for any driver's limit.
_CHUNK = 500


def record_history(session: Session, feed_id: str, ref: str) -> list[dict[str, Any]]:
    """Every version of the feed's record `ref`, oldest first.

    Each version is a dict of `version`, `updated_at` and `replaced_at` (C1 time
    strings; `replaced_at` is None for the current version) and the record's content
    fields (`port_unlocode` … `ship_agent`, `commodity_leaf`), times as C1 strings.
    Raises NotFound when the feed has no such record."""
    record = session.scalar(select(Record).where(Record.feed_id == feed_id, Record.ref == ref))
    if record is None:
        raise NotFound(f"No record {ref!r} in feed {feed_id}")
    revisions = session.scalars(
        select(RecordRevision)
        .where(RecordRevision.record_id == record.id)
        .order_by(RecordRevision.version)
    )
    versions = [
        _version(r.version, r.updated_at, r.replaced_at, r.content) for r in revisions
    ]
    versions.append(_version(record.version, record.updated_at, None, content_json(record)))
    return versions


def _version(version, updated_at, replaced_at, content: dict) -> dict[str, Any]:
    return {
        "version": version,
        "updated_at": format_time(updated_at),
        "replaced_at": format_time(replaced_at),
        **content,
    }


@dataclass(frozen=True)
class EtaSlip:
    """How a record's ETA moved across its versions.

    `etas` holds (version, ETA) oldest first, the ETA an aware UTC datetime or None.
    `first_eta` is the earliest version's non-blank ETA, `current_eta` the current
    version's; `slip_hours` is current minus first in hours (positive: later than
    first announced), None when either is blank."""

    etas: tuple[tuple[int, dt.datetime | None], ...]
    first_eta: dt.datetime | None
    current_eta: dt.datetime | None
    slip_hours: float | None


def eta_slips(session: Session, keys: Iterable[RecordKey]) -> dict[RecordKey, EtaSlip]:
    """The ETA history of each record named by (feed id, ref), for the explorer to show
    how much a call slipped. Keys that name no record are left out of the result."""
    wanted = sorted(set(keys))
    current: dict[int, tuple[RecordKey, int, dt.datetime | None]] = {}
    for start in range(0, len(wanted), _CHUNK):
        rows = session.execute(
            select(Record.id, Record.feed_id, Record.ref, Record.version, Record.eta).where(
                tuple_(Record.feed_id, Record.ref).in_(wanted[start : start + _CHUNK])
            )
        )
        for rid, feed_id, ref, version, eta in rows:
            current[rid] = ((feed_id, ref), version, _aware(eta))
    earlier: dict[int, list[tuple[int, dt.datetime | None]]] = {rid: [] for rid in current}
    ids = sorted(current)
    for start in range(0, len(ids), _CHUNK):
        rows = session.execute(
            select(RecordRevision.record_id, RecordRevision.version, RecordRevision.content)
            .where(RecordRevision.record_id.in_(ids[start : start + _CHUNK]))
        )
        for rid, version, content in rows:
            eta = content.get("eta")
            earlier[rid].append((version, parse_time(eta) if eta else None))
    slips = {}
    for rid, (key, version, eta) in current.items():
        etas = tuple(sorted(earlier[rid])) + ((version, eta),)
        slips[key] = _slip(etas)
    return slips


def _slip(etas: tuple[tuple[int, dt.datetime | None], ...]) -> EtaSlip:
    first = next((eta for _, eta in etas if eta is not None), None)
    now = etas[-1][1]
    hours = (now - first).total_seconds() / 3600 if first and now else None
    return EtaSlip(etas, first, now, hours)


def _aware(value: dt.datetime | None) -> dt.datetime | None:
    """A stored naive UTC time as an aware one."""
    return value.replace(tzinfo=dt.timezone.utc) if value is not None else None
