"""Operators' commodity work (contract C6): unresolved strings and mappings.

A mapping ties a raw commodity string (compared ignoring case, accents, punctuation
and spacing) to a taxonomy leaf. Making one resolves the stored records at once and
applies to every later ingest. Functions take a session and never commit.
"""

from __future__ import annotations

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from store.errors import ValidationError
from store.feeds import bump_versions
from store.fields import utcnow
from store.normalize import lookup_key
from store.schema import CommodityMapping, Feed, Record
from store.taxonomy import default_taxonomy


def mappings(session: Session) -> dict[str, str]:
    """The operator's mappings: lookup key of the raw string -> leaf id."""
    return dict(session.execute(select(CommodityMapping.raw_key, CommodityMapping.leaf_id)).all())


def unresolved(session: Session) -> list[dict]:
    """Raw commodity strings that resolve to no leaf, with their record counts, most
    frequent first."""
    rows = session.execute(
        select(Record.commodity, func.count())
        .where(Record.commodity.is_not(None), Record.commodity_leaf.is_(None))
        .group_by(Record.commodity)
        .order_by(func.count().desc(), Record.commodity)
    )
    return [{"raw": raw, "count": count} for raw, count in rows]


def map_commodity(session: Session, raw: str, leaf: str) -> dict:
    """Map `raw` to the leaf named `leaf` (its id or name) and resolve the stored
    records that carry it. Raises ValidationError for an unknown leaf or empty raw."""
    key = lookup_key(raw)
    if not key:
        raise ValidationError.parameter("raw", "the raw commodity is empty")
    taxonomy = default_taxonomy()
    target = _find_leaf(taxonomy, leaf)
    row = session.get(CommodityMapping, key)
    if row is None:
        session.add(
            CommodityMapping(raw_key=key, raw=raw.strip(), leaf_id=target.id, created_at=utcnow().replace(tzinfo=None))
        )
    else:
        row.raw, row.leaf_id = raw.strip(), target.id
    feeds = list(session.scalars(select(Record.feed_id).where(Record.commodity_raw_key == key).distinct()))
    bump_versions(session, feeds)
    # Each record notes its feed's new version, so caches re-read just these (C6).
    feed_version = select(Feed.data_version).where(Feed.id == Record.feed_id).scalar_subquery()
    result = session.execute(
        update(Record)
        .where(Record.commodity_raw_key == key)
        .values(commodity_leaf=target.id, changed_version=feed_version)
    )
    session.flush()
    return {"raw": raw.strip(), "leaf": target.name, "leaf_id": target.id, "records_resolved": result.rowcount}


def _find_leaf(taxonomy, ident: str):
    try:
        return taxonomy.leaf(ident)
    except KeyError:
        pass
    wanted = lookup_key(ident)
    for leaf in taxonomy.leaves:
        if lookup_key(leaf.name) == wanted:
            return leaf
    raise ValidationError.parameter("leaf", f"{ident!r} is not a leaf of the commodity taxonomy")
