"""Buyers, API keys and subscriptions (contract C5, C11).

API keys are `lk_` + 32 lowercase hex characters. They are shown once when created
and stored only as SHA-256 hashes with a short display prefix. Functions take a
session and neither commit nor close it.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import uuid
from dataclasses import dataclass
from typing import Callable, Hashable, Sequence

from sqlalchemy import Connection, and_, bindparam, func, or_, select, update
from sqlalchemy.orm import Session

from store.db import ReplicaBehind, is_replica
from store.errors import Forbidden, LineupsError, NotFound, Unauthorized, ValidationError
from store.feeds import is_uuid
from store.fields import utcnow
from store.schema import ApiKey, Buyer, Feed, Subscription

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
    if session.scalar(select(Buyer.id).where(Buyer.name == name)) is not None:
        raise ValidationError.parameter("name", f"a buyer named {name!r} exists already")
    buyer = Buyer(id=str(uuid.uuid4()), name=name, status="active", created_at=_now())
    session.add(buyer)
    session.flush()
    return buyer


def find_buyer(session: Session, ident: str) -> Buyer:
    """The buyer whose id or name is `ident`. Raises NotFound."""
    buyer = session.get(Buyer, ident) if is_uuid(ident) else None
    if buyer is None:
        buyer = session.scalar(select(Buyer).where(Buyer.name == ident))
    if buyer is None:
        raise NotFound(f"No buyer with id or name {ident!r}")
    return buyer


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
        created_at=_now(),
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
    elif is_uuid(ident):
        row = session.get(ApiKey, ident)
    else:
        rows = list(session.scalars(select(ApiKey).where(ApiKey.prefix == ident)))
        row = rows[0] if len(rows) == 1 else None
    if row is None:
        raise NotFound("No such API key (give the key, its id, or its unique prefix)")
    return row


def revoke_key(session: Session, row: ApiKey) -> ApiKey:
    """Revoke a key at once; later requests with it get 401 (C5)."""
    if row.revoked_at is None:
        row.revoked_at = _now()
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
        row.last_used_at = _now()
    return buyer


def key_holder(session: Session, row: ApiKey | None, revoked: str = INVALID_KEY, gone: str = INVALID_KEY) -> Buyer:
    """The buyer of the API key `row` when the key and the buyer may be used now (C5):
    the check that `authenticate` and the explorer's sessions share.

    Raises Unauthorized(`revoked`) for no key or a revoked one, Unauthorized(`gone`)
    for a key whose buyer is gone, and Forbidden for a suspended buyer."""
    if row is None or row.revoked_at is not None:
        raise Unauthorized(revoked)
    return active_buyer(session, row.buyer_id, Unauthorized(gone))


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


def recently_active_buyers(session: Session, limit: int) -> list[str]:
    """Up to `limit` active buyers with at least one active or trial subscription,
    those whose keys were used most recently first (never-used keys last, then by
    name): the buyers most likely to ask again first after a restart."""
    last_use = func.max(ApiKey.last_used_at)
    entitled = (
        select(Subscription.buyer_id)
        .where(Subscription.buyer_id == Buyer.id, Subscription.status.in_(ENTITLED))
        .exists()
    )
    rows = session.execute(
        select(Buyer.id)
        .outerjoin(ApiKey, and_(ApiKey.buyer_id == Buyer.id, ApiKey.revoked_at.is_(None)))
        .where(Buyer.status == "active", entitled)
        .group_by(Buyer.id, Buyer.name)
        .order_by(last_use.desc().nulls_last(), Buyer.name)
        .limit(limit)
    )
    return list(rows.scalars())


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


class Admissions:
    """`admit`, remembering the admissions of keys while the store is unchanged.

    `stamp` is the store's change stamp (`store.changes.change_stamp`): it is taken
    before each query, and a remembered admission is given only while the stamp still
    has that value, so that a revoked key, a suspended buyer or a changed subscription
    is seen by the very next request, as without the memory. Refusals are never
    remembered. Where the store has no stamp (None), every call reads the store."""

    def __init__(self, stamp: Callable[[], Hashable | None], size: int = 10_000):
        self._stamp = stamp
        self._size = size
        self._known: dict[str, tuple[Hashable, Admission]] = {}

    @property
    def stamp(self) -> Callable[[], Hashable | None]:
        """The store's change stamp that admissions are checked against."""
        return self._stamp

    def cached(self, key: str, key_hash: str | None = None, stamp: Callable[[], Hashable | None] | None = None) -> Admission | None:
        """The admission of `key` (whose `hash_key` the caller may pass when it has
        it) when it is remembered and the store has not changed since; else None
        (then call `admit`). Never blocks on the store. `stamp` reads the store's
        change stamp in the caller's way (the API's event loop reads it once per
        turn: `api.base.TurnStamp`); `self.stamp` when not given."""
        hit = self._known.get(key_hash or hash_key(key))
        if hit is None:
            return None
        now = (stamp or self._stamp)()
        return hit[1] if now is not None and now == hit[0] else None

    def admit(self, connection: Connection, key: str | None) -> Admission:
        """`admit(connection, key)`, remembered when the store has a stamp."""
        stamp = self._stamp()
        admission = admit(connection, key)
        if stamp is not None:
            if len(self._known) >= self._size:
                self._known.clear()
            self._known[hash_key(key)] = (stamp, admission)
        return admission


def touch_key(connection: Connection, key: str) -> None:
    """Note that `key` was used now (`last_used_at`)."""
    connection.execute(update(ApiKey).where(ApiKey.key_hash == hash_key(key)).values(last_used_at=_now()))


def set_subscription(session: Session, buyer: Buyer, feed: Feed, status: str) -> Subscription:
    """Set the buyer's subscription to `feed` (active, trial or cancelled)."""
    status = status.strip().lower()
    if status not in SUBSCRIPTION_STATUSES:
        raise ValidationError.parameter(
            "status", f"must be one of {', '.join(SUBSCRIPTION_STATUSES)}"
        )
    sub = session.get(Subscription, (buyer.id, feed.id))
    if sub is None:
        sub = Subscription(buyer_id=buyer.id, feed_id=feed.id, status=status, changed_at=_now())
        session.add(sub)
    elif sub.status != status:
        sub.status, sub.changed_at = status, _now()
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


def _now():
    return utcnow().replace(tzinfo=None)
