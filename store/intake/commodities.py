"""Operators' commodity work (contract C6): unresolved strings and mappings.

A mapping ties a raw commodity string (compared ignoring case, accents, punctuation
and spacing) to a taxonomy leaf. Making one resolves the stored records at once and
applies to every later ingest. Functions take a session and never commit.
"""

from __future__ import annotations

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from store.errors import ValidationError
from store.intake.feeds import bump_versions
from store.fields import stored_now
from store.normalize import lookup_key
from store.database.db import sqlite_page_cache
from store.database.schema import CommodityMapping, Feed, Record
from store.reference.taxonomy import default_taxonomy
from store.views import changelog, upkeep


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
            CommodityMapping(raw_key=key, raw=raw.strip(), leaf_id=target.id, created_at=stored_now())
        )
    else:
        row.raw, row.leaf_id = raw.strip(), target.id
    touched = session.execute(
        select(Record.feed_id, Record.vessel_key, Record.port_unlocode).where(Record.commodity_raw_key == key).distinct()
    ).all()
    feeds = sorted({feed_id for feed_id, _, _ in touched})
    bump_versions(session, feeds)
    result = session.execute(update(Record).where(Record.commodity_raw_key == key).values(commodity_leaf=target.id))
    session.flush()
    # The records changed their merge key (C2.2: the commodity key): the kept views of
    # their feeds merge those vessels again (issue 15).
    versions = dict(session.execute(select(Feed.id, Feed.data_version).where(Feed.id.in_(feeds))).all())
    for feed_id in feeds:
        changelog.note_changes(session, feed_id, versions[feed_id], [(v, p) for f, v, p in touched if f == feed_id])
    with sqlite_page_cache(session):  # a mapping may touch many pairs of many views
        upkeep.refresh_feeds(session, feeds)
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
    level = taxonomy.level_of(ident)
    reason = f"{ident!r} is a {level}, not a leaf" if level else f"{ident!r} is not a leaf of the commodity taxonomy"
    suggestions = taxonomy.suggest_leaves(ident)
    if suggestions:
        reason += f"; did you mean {', '.join(repr(name) for name in suggestions)}?"
    error = ValidationError.parameter("leaf", reason + " (`lineups commodity list` shows every leaf)")
    error.details["suggestions"] = suggestions
    raise error


def leaf_list(search: str = "") -> list[dict]:
    """The taxonomy's leaves containing `search` (see `Taxonomy.search`), each with its
    id, name, subgroup, group and aliases."""
    return [
        {"id": leaf.id, "name": leaf.name, "subgroup": leaf.subgroup, "group": leaf.group, "aliases": list(leaf.aliases)}
        for leaf in default_taxonomy().search(search)
    ]


def leaf_tree(search: str = "") -> list[dict]:
    """`leaf_list` as groups holding subgroups holding leaves, in taxonomy order."""
    groups: dict[str, dict[str, list[dict]]] = {}
    for leaf in leaf_list(search):
        subgroups = groups.setdefault(leaf.pop("group"), {})
        subgroups.setdefault(leaf.pop("subgroup"), []).append(leaf)
    return [
        {"name": group, "subgroups": [{"name": name, "leaves": leaves} for name, leaves in subgroups.items()]}
        for group, subgroups in groups.items()
    ]
