"""Buyers, API keys and subscriptions (contract C5, C11).

API keys are `lk_` + 32 lowercase hex characters. They are shown once when created
and stored only as SHA-256 hashes with a short display prefix. Functions take a
session and neither commit nor close it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import secrets
import uuid
from dataclasses import dataclass
from typing import Mapping, Sequence

from sqlalchemy import Connection, and_, bindparam, or_, select, update
from sqlalchemy.orm import Session

from store.database.db import ReplicaBehind, is_replica
from store.errors import Forbidden, LineupsError, NotFound, Unauthorized, ValidationError
from store.ids import canonical_uuid
from store.fields import format_time, stored_now
from store.names import check_free, find_named
from store.database.schema import ApiKey, Buyer, Feed, Subscription

KEY_PATTERN = re.compile(r"^lk_[0-9a-f]{32}$")
BUYER_STATUSES = ("active", "suspended")
SUBSCRIPTION_STATUSES = ("active", "trial", "cancelled")
#: Subscription states that give access to a feed's records (seed 1.2).
ENTITLED = ("active", "trial")
INVALID_KEY = "Invalid API key"
SUSPENDED = "This buyer account is suspended"


def hash_key(key: str) -> str:
    """The stored form of an API key."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def add_buyer(session: Session, name: str) -> Buyer:
    """Create an active buyer. Raises ValidationError for a blank or taken name."""
    name = " ".join(name.split())
    if not name:
        raise ValidationError.parameter("name", "a buyer needs a name")
    check_free(session, Buyer.name, name, "buyer")
    buyer = Buyer(id=str(uuid.uuid4()), name=name, status="active", created_at=stored_now())
    session.add(buyer)
    session.flush()
    return buyer


def find_buyer(session: Session, ident: str) -> Buyer:
    """The buyer whose id or name is `ident` (names ignoring case and spacing, C11).
    Raises NotFound, naming near names."""
    return find_named(session, Buyer, Buyer.name, ident, "buyer")


def list_buyers(session: Session) -> list[Buyer]:
    """Every buyer, ordered by name."""
    return list(session.scalars(select(Buyer).order_by(Buyer.name)))


def buyer_dict(buyer: Buyer) -> dict[str, str | None]:
    """A buyer as the command line lists it."""
    return {"id": buyer.id, "name": buyer.name, "status": buyer.status, "created_at": format_time(buyer.created_at)}


def set_buyer_status(session: Session, buyer: Buyer, status: str) -> Buyer:
    """Suspend or resume a buyer. A suspended buyer's keys get 403 (C5)."""
    if status not in BUYER_STATUSES:
        raise ValidationError.parameter("status", f"must be one of {', '.join(BUYER_STATUSES)}")
    buyer.status = status
    session.flush()
    return buyer


def create_key(session: Session, buyer: Buyer) -> tuple[str, ApiKey]:
    """A new API key for `buyer`: returns the key text (shown this once) and its row."""
    key = "lk_" + secrets.token_hex(16)
    row = ApiKey(
        id=str(uuid.uuid4()),
        buyer_id=buyer.id,
        key_hash=hash_key(key),
        prefix=key[:7],
        created_at=stored_now(),
    )
    session.add(row)
    session.flush()
    return key, row


def find_key(session: Session, ident: str) -> ApiKey:
    """The key named by its full text, its id, or its display prefix (when unique).
    Raises NotFound."""
    ident = ident.strip()
    if KEY_PATTERN.match(ident):
        row = session.scalar(select(ApiKey).where(ApiKey.key_hash == hash_key(ident)))
    elif key_id := canonical_uuid(ident):
        row = session.get(ApiKey, key_id)
    else:
        rows = list(session.scalars(select(ApiKey).where(ApiKey.prefix == ident)))
        row = rows[0] if len(rows) == 1 else None
    if row is None:
        raise NotFound("No such API key (give the key, its id, or its unique prefix)")
    return row


def list_keys(session: Session, buyer_id: str) -> list[ApiKey]:
    """A buyer's API keys, revoked ones too, oldest first."""
    return list(session.scalars(select(ApiKey).where(ApiKey.buyer_id == buyer_id).order_by(ApiKey.created_at, ApiKey.id)))


def key_dict(row: ApiKey) -> dict[str, str | None]:
    """An API key as the command line lists it: by id and display prefix, never the
    key or its hash (C5: the key is shown once, at creation)."""
    return {
        "id": row.id,
        "prefix": row.prefix,
        "created_at": format_time(row.created_at),
        "last_used_at": format_time(row.last_used_at),
        "revoked_at": format_time(row.revoked_at),
    }


def revoke_key(session: Session, row: ApiKey) -> ApiKey:
    """Revoke a key at once; later requests with it get 401 (C5)."""
    if row.revoked_at is None:
        row.revoked_at = stored_now()
        session.flush()
    return row


def authenticate(session: Session, key: str | None, touch: bool = True) -> Buyer:
    """The buyer an `X-API-Key` value belongs to (C5).

    Raises Unauthorized for a missing, malformed, unknown or revoked key, and
    Forbidden for a key of a suspended buyer."""
    if not key:
        raise Unauthorized("Missing API key: send it in the X-API-Key header")
    if not KEY_PATTERN.match(key):
        raise Unauthorized(INVALID_KEY)
    digest = hash_key(key)
    row = session.scalar(select(ApiKey).where(ApiKey.key_hash == digest))
    # The lookup is by hash; the comparison below keeps the final check constant-time.
    if row is not None and not secrets.compare_digest(row.key_hash, digest):
        row = None
    buyer = key_holder(session, row)
    if touch:
        row.last_used_at = stored_now()
    return buyer


def key_holder(session: Session, row: ApiKey | None, revoked: str = INVALID_KEY, gone: str = INVALID_KEY) -> Buyer:
    """The buyer of the API key `row` when the key and the buyer may be used now (C5):
    the check that `authenticate` and the explorer's sessions share.

    Raises Unauthorized(`revoked`) for no key or a revoked one, Unauthorized(`gone`)
    for a key whose buyer is gone, and Forbidden for a suspended buyer."""
    if row is None or row.revoked_at is not None:
        raise Unauthorized(revoked)
    return active_buyer(session, row.buyer_id, Unauthorized(gone))


def signed_in_buyer(session: Session, buyer_id: str, key_id: str) -> Buyer:
    """The buyer of an explorer sign-in (the buyer and the row id of the API key it
    was made with), re-read now: the explorer's sessions and download tickets.

    Raises Unauthorized when the key is gone, revoked or no longer the buyer's, and
    Forbidden when the buyer is suspended."""
    row = session.get(ApiKey, key_id)
    if row is not None and row.buyer_id != buyer_id:
        row = None
    return key_holder(session, row, revoked="This API key was revoked: sign in again", gone="This account no longer exists")


def active_buyer(session: Session, buyer_id: str, missing: LineupsError, suspended: str = SUSPENDED) -> Buyer:
    """The buyer `buyer_id` when it is active. Raises `missing` when there is no such
    buyer and Forbidden(`suspended`) when it is suspended (C5, C8)."""
    buyer = session.get(Buyer, buyer_id)
    if buyer is None:
        raise missing
    if buyer.status != "active":
        raise Forbidden(suspended)
    return buyer


@dataclass(frozen=True)
class FeedVersion:
    """A feed as the lineup caches need it: id, name, and the version of its data."""

    id: str
    name: str
    data_version: int


def entitled_feeds(session: Session, buyer_id: str) -> list[FeedVersion]:
    """The feeds with an active or trial subscription, ordered by feed name, as plain
    values: one small query, no ORM objects (every lineup request asks it)."""
    rows = session.execute(
        select(Feed.id, Feed.name, Feed.data_version)
        .join(Subscription, Subscription.feed_id == Feed.id)
        .where(Subscription.buyer_id == buyer_id, Subscription.status.in_(ENTITLED))
        .order_by(Feed.name)
    )
    return [FeedVersion(*row) for row in rows]


def feed_versions_in(session: Session, feeds: Sequence[FeedVersion]) -> tuple[FeedVersion, ...]:
    """`feeds` (read on the primary: which feeds a buyer may see) with the data
    versions of the database `session` reads, ordered by name. On the primary that is
    `feeds` themselves; on a replica the versions are read again in `session`'s
    transaction, so that the version a merge cache keys on is the version of the
    records it then loads there (a lagging replica gives older data, never a mix).
    Raises ReplicaBehind when the replica does not know one of the feeds yet."""
    if not is_replica(session) or not feeds:
        return tuple(feeds)
    ids = [feed.id for feed in feeds]
    found = {
        row.id: FeedVersion(*row)
        for row in session.execute(select(Feed.id, Feed.name, Feed.data_version).where(Feed.id.in_(ids)))
    }
    missing = [feed_id for feed_id in ids if feed_id not in found]
    if missing:
        raise ReplicaBehind(f"feed {missing[0]} is not on the replica yet")
    return tuple(found[feed_id] for feed_id in ids)


@dataclass(frozen=True)
class Admission:
    """Who an API key lets in: the buyer and the feeds it may see now."""

    buyer_id: str
    feeds: tuple[FeedVersion, ...]


def _admission_query():
    # Equalities, not IN: an IN list is rendered again on every execution.
    entitled = and_(Subscription.buyer_id == Buyer.id, or_(*(Subscription.status == s for s in ENTITLED)))
    return (
        select(ApiKey.key_hash, ApiKey.revoked_at, Buyer.id, Buyer.status, Feed.id, Feed.name, Feed.data_version)
        .select_from(ApiKey)
        .join(Buyer, Buyer.id == ApiKey.buyer_id)
        .outerjoin(Subscription, entitled)
        .outerjoin(Feed, Feed.id == Subscription.feed_id)
        .where(ApiKey.key_hash == bindparam("key_hash"))
        .order_by(Feed.name)
    )


_ADMISSION = _admission_query()


def admit(connection: Connection, key: str | None) -> Admission:
    """The buyer an `X-API-Key` value belongs to, with its entitled feeds (ordered by
    name, as `entitled_feeds`), read in one query: every API request asks it.

    Raises Unauthorized for a missing, malformed, unknown or revoked key, and
    Forbidden for a key of a suspended buyer (C5), as `authenticate` does."""
    if not key:
        raise Unauthorized("Missing API key: send it in the X-API-Key header")
    if not KEY_PATTERN.match(key):
        raise Unauthorized(INVALID_KEY)
    digest = hash_key(key)
    rows = connection.execute(_ADMISSION, {"key_hash": digest}).all()
    # The lookup is by hash; the comparison below keeps the final check constant-time.
    if not rows or not secrets.compare_digest(rows[0][0], digest) or rows[0][1] is not None:
        raise Unauthorized(INVALID_KEY)
    if rows[0][3] != "active":
        raise Forbidden(SUSPENDED)
    feeds = tuple(FeedVersion(feed_id, name, version) for *_, feed_id, name, version in rows if feed_id is not None)
    return Admission(rows[0][2], feeds)


def note_key_uses(connection: Connection, last_used: Mapping[str, dt.datetime]) -> None:
    """Write `last_used_at` of the keys whose hashes are the keys of `last_used`
    (naive UTC times), in one statement: the batches of `store.access.usage.UsageWriter`."""
    if last_used:
        connection.execute(
            update(ApiKey).where(ApiKey.key_hash == bindparam("b_hash")).values(last_used_at=bindparam("b_when")),
            [{"b_hash": key_hash, "b_when": when} for key_hash, when in last_used.items()],
        )


def set_subscription(session: Session, buyer: Buyer, feed: Feed, status: str) -> Subscription:
    """Set the buyer's subscription to `feed` (active, trial or cancelled)."""
    status = status.strip().lower()
    if status not in SUBSCRIPTION_STATUSES:
        raise ValidationError.parameter(
            "status", f"must be one of {', '.join(SUBSCRIPTION_STATUSES)}"
        )
    sub = session.get(Subscription, (buyer.id, feed.id))
    if sub is None:
        sub = Subscription(buyer_id=buyer.id, feed_id=feed.id, status=status, changed_at=stored_now())
        session.add(sub)
    elif sub.status != status:
        sub.status, sub.changed_at = status, stored_now()
    session.flush()
    return sub


@dataclass(frozen=True)
class Entitlement:
    """A feed the buyer may see, with the subscription status that allows it."""

    feed: Feed
    status: str


def entitlements(session: Session, buyer_id: str) -> list[Entitlement]:
    """The feeds with an active or trial subscription, ordered by feed name (C7)."""
    rows = session.execute(
        select(Feed, Subscription.status)
        .join(Subscription, Subscription.feed_id == Feed.id)
        .where(Subscription.buyer_id == buyer_id, Subscription.status.in_(ENTITLED))
        .order_by(Feed.name)
    )
    return [Entitlement(feed, status) for feed, status in rows]
