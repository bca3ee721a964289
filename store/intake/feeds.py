"""Feeds: the data sources buyers subscribe to (contract C7, C11).

Functions take a session and neither commit nor close it.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from store.errors import ValidationError
from store.fields import format_time, stored_now
from store.names import check_free, find_named
from store.reference.ports import default_directory, looks_like_unlocode
from store.database.schema import Feed, FeedPort


def add_feed(
    session: Session,
    name: str,
    ports: list[str],
    frequency: str | None = None,
    feed_type: str | None = None,
    coverage_rating: float | None = None,
    commodity_rating: float | None = None,
    commercial_rating: float | None = None,
) -> Feed:
    """Create a feed over `ports` (UN/LOCODEs of the directory, in order).

    Raises ValidationError for a blank or taken name, no port, or a port the
    directory does not know."""
    name = " ".join(name.split())
    if not name:
        raise ValidationError.parameter("name", "a feed needs a name")
    check_free(session, Feed.name, name, "feed")
    if not ports:
        raise ValidationError.parameter("port", "a feed needs at least one port")
    codes = []
    for code in ports:
        code = code.strip().upper()
        if not looks_like_unlocode(code) or code not in default_directory():
            raise ValidationError.parameter("port", f"{code!r} is not a port of the UN/LOCODE directory")
        if code not in codes:
            codes.append(code)
    for label, rating in (
        ("coverage_rating", coverage_rating),
        ("commodity_rating", commodity_rating),
        ("commercial_rating", commercial_rating),
    ):
        if rating is not None and not 0 <= rating <= 5:
            raise ValidationError.parameter(label, "a rating lies between 0 and 5")
    feed = Feed(
        id=str(uuid.uuid4()),
        name=name,
        frequency=frequency,
        feed_type=feed_type,
        coverage_rating=coverage_rating,
        commodity_rating=commodity_rating,
        commercial_rating=commercial_rating,
        created_at=stored_now(),
        data_version=0,
        ports=[FeedPort(position=i, unlocode=code) for i, code in enumerate(codes)],
    )
    session.add(feed)
    session.flush()
    return feed


def list_feeds(session: Session) -> list[Feed]:
    """Every feed, ordered by name."""
    return list(session.scalars(select(Feed).order_by(Feed.name)))


def find_feed(session: Session, ident: str) -> Feed:
    """The feed whose id or name is `ident` (names ignoring case and spacing, C11).
    Raises NotFound, naming near names."""
    return find_named(session, Feed, Feed.name, ident, "feed")


def bump_versions(session: Session, feed_ids: list[str]) -> None:
    """Mark the feeds' records as changed: the callers note, in the same transaction,
    the (vessel, port) pairs they touched at the new `data_version`
    (`store.views.changelog.note_changes`), and kept views of the feeds are behind until
    brought up to date."""
    if feed_ids:
        session.execute(
            update(Feed).where(Feed.id.in_(feed_ids)).values(data_version=Feed.data_version + 1)
        )


def lock_feed(session: Session, feed_id: str) -> None:
    """Hold the feed's row until the transaction ends, so that a change of the feed's
    records reads them and writes them with no other change of the feed between: an
    update that changes nothing takes the row's lock on PostgreSQL, and on SQLite the
    write lock (pysqlite opens its transaction at the first write, so reads made
    before it could be older than what the change then writes)."""
    session.execute(update(Feed).where(Feed.id == feed_id).values(data_version=Feed.data_version))


def next_version(session: Session, feed_id: str) -> int:
    """Bump the feed's `data_version` and return the new value: the version of the
    change the caller is about to write. The update locks the feed's row until the
    transaction ends, so concurrent ingests into one feed get distinct versions."""
    bump_versions(session, [feed_id])
    return session.scalar(select(Feed.data_version).where(Feed.id == feed_id))


def feed_dict(feed: Feed) -> dict[str, Any]:
    """A feed as the command line and the API describe it (C7 fields, without the
    buyer-specific subscription status)."""
    directory = default_directory()
    ports = []
    for feed_port in feed.ports:
        port = directory.get(feed_port.unlocode)
        ports.append(
            {
                "unlocode": feed_port.unlocode,
                "name": port.name if port else None,
                "country_name": port.country_name if port else None,
            }
        )
    first = ports[0] if ports else {"unlocode": None, "name": None}
    return {
        "id": feed.id,
        "name": feed.name,
        "port_name": first["name"],
        "port_unlocode": first["unlocode"],
        "ports": ports,
        "frequency": feed.frequency,
        "feed_type": feed.feed_type,
        "coverage_rating": feed.coverage_rating,
        "commodity_rating": feed.commodity_rating,
        "commercial_rating": feed.commercial_rating,
        "created_at": format_time(feed.created_at),
    }

