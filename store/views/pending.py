"""What a buyer has asked for and what they read: subscription changes that wait for
their view, and the switch to it (issue 47).

Readers (the API, share links, the explorer) see a buyer's **effective** state only:
the buyer's `status` and their subscriptions' `status` (`accounts.admit`,
`accounts.entitled_feeds`, then `store.views.lineups.visible_feeds` and
`current_target` find the view). An operator's change is written as the buyer's
**wanted** state, and takes effect so:

- what removes access takes effect at once: a cancelled subscription, a suspended
  buyer (C5, C8). The buyer then reads the view of the feeds left to them (built by
  the builder, or by their first read if that comes first).
- a change between `active` and `trial` of a feed the buyer reads takes effect at
  once: it changes no feed set.
- what gives the buyer a feed they cannot read yet (`active` or `trial`), and a
  resume, waits for the view of the feeds they will see (`SubscriptionRequest`,
  `BuyerRequest.wanted_status`); until then the buyer reads their previous feeds.

`switch` makes every waiting change of one buyer effective in one transaction, once
the view of their wanted feeds is ready (or none is needed): readers see the old
feeds or the new ones, never a mix. A `BuyerRequest` row is the builder's to-do
(`store.views.builder`): added by every change, deleted by the switch.
Functions take a session and neither commit nor close it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from store.access import accounts
from store.access.accounts import ENTITLED
from store.database.schema import Buyer, BuyerRequest, Feed, MergedView, Subscription, SubscriptionRequest
from store.errors import ValidationError
from store.fields import format_time, stored_now
from store.views.upkeep import MODES, ViewKey


@dataclass(frozen=True)
class Wanted:
    """A buyer's wanted state: their status and the feeds they will read."""

    status: str
    feeds: frozenset[str]

    def view_keys(self) -> list[ViewKey]:
        """The views the buyer's pages over all their feeds read once it is in effect
        (none for a suspended buyer, or one of no feeds)."""
        if self.status != "active" or not self.feeds:
            return []
        return [ViewKey.of(mode, self.feeds) for mode in MODES]


def wanted(session: Session, buyer: Buyer) -> Wanted:
    """The buyer's state once every waiting change is in effect."""
    feeds = {feed.id for feed in accounts.entitled_feeds(session, buyer.id)}
    feeds |= set(session.scalars(select(SubscriptionRequest.feed_id).where(SubscriptionRequest.buyer_id == buyer.id)))
    waiting = session.get(BuyerRequest, buyer.id)
    return Wanted((waiting.wanted_status if waiting is not None else None) or buyer.status, frozenset(feeds))


def request_subscriptions(session: Session, buyer: Buyer, feeds: Sequence[Feed], status: str) -> None:
    """Ask for the buyer's subscription to each of `feeds` to be `status` (active,
    trial or cancelled): what removes access or changes no feed set at once, what
    gives a feed the buyer does not read yet as a request (module docstring). Raises
    ValidationError for another status."""
    status = status.strip().lower()
    if status not in accounts.SUBSCRIPTION_STATUSES:
        raise ValidationError.parameter("status", f"must be one of {', '.join(accounts.SUBSCRIPTION_STATUSES)}")
    _lock(session, buyer)
    for feed in feeds:
        current = session.get(Subscription, (buyer.id, feed.id), populate_existing=True)
        waiting = session.get(SubscriptionRequest, (buyer.id, feed.id), populate_existing=True)
        if status not in ENTITLED or (current is not None and current.status in ENTITLED):
            accounts.set_subscription(session, buyer, feed, status)
            if waiting is not None:
                session.delete(waiting)
        elif waiting is None:
            session.add(
                SubscriptionRequest(buyer_id=buyer.id, feed_id=feed.id, status=status, requested_at=stored_now())
            )
        else:
            waiting.status = status
    _to_do(session, buyer)
    session.flush()


def request_buyer_status(session: Session, buyer: Buyer, status: str) -> None:
    """Ask for the buyer to be `status`: suspended at once (C5), resumed once their
    view is ready. Raises ValidationError for another status."""
    if status not in accounts.BUYER_STATUSES:
        raise ValidationError.parameter("status", f"must be one of {', '.join(accounts.BUYER_STATUSES)}")
    _lock(session, buyer)
    waiting = _to_do(session, buyer)
    if status == "suspended" or buyer.status == status:
        accounts.set_buyer_status(session, buyer, status)
        waiting.wanted_status = None
    else:
        waiting.wanted_status = status
    session.flush()


def _lock(session: Session, buyer: Buyer) -> None:
    """Hold the buyer's row for the rest of the transaction, and read it again: a
    change and a switch of one buyer take turns (PostgreSQL: the row's lock; SQLite:
    its write lock, taken by this first write, so that what is read next is not
    changed by another writer before this transaction writes)."""
    session.execute(update(Buyer).where(Buyer.id == buyer.id).values(status=Buyer.status))
    session.refresh(buyer)


def _to_do(session: Session, buyer: Buyer) -> BuyerRequest:
    """The buyer's row of the builder's to-do, added when missing."""
    waiting = session.get(BuyerRequest, buyer.id, populate_existing=True)
    if waiting is None:
        waiting = BuyerRequest(buyer_id=buyer.id, wanted_status=None, requested_at=stored_now())
        session.add(waiting)
    return waiting


def views_ready(session: Session, keys: Sequence[ViewKey]) -> bool:
    """Whether every view of `keys` has been built (it may be behind its feeds: a
    reader brings it up to date from the change log, a few pairs' work)."""
    for key in keys:
        state = session.scalar(
            select(MergedView.state).where(MergedView.mode == key.mode, MergedView.feed_set == key.feed_set)
        )
        if state != "ready":
            return False
    return True


def switch(session: Session, buyer_id: str) -> bool:
    """Make the buyer's waiting changes effective, all in this transaction, when the
    views of their wanted state are ready (or none is needed); True when nothing
    waits any longer. The buyer's row is held first (`_lock`), so that a change
    committing meanwhile is either all in or waits."""
    buyer = session.get(Buyer, buyer_id)
    if buyer is None:
        return True
    _lock(session, buyer)
    waiting = session.get(BuyerRequest, buyer_id, populate_existing=True)
    if waiting is None:
        return True
    goal = wanted(session, buyer)
    if not views_ready(session, goal.view_keys()):
        return False
    asked = select(SubscriptionRequest).where(SubscriptionRequest.buyer_id == buyer_id)
    for subscription in session.scalars(asked).all():
        accounts.set_subscription(session, buyer, session.get(Feed, subscription.feed_id), subscription.status)
    session.execute(delete(SubscriptionRequest).where(SubscriptionRequest.buyer_id == buyer_id))
    if waiting.wanted_status is not None:
        accounts.set_buyer_status(session, buyer, waiting.wanted_status)
    session.delete(waiting)
    session.flush()
    return True


def waiting_buyers(session: Session) -> list[str]:
    """The ids of buyers whose view wants building or whose changes wait, the
    longest waiting first."""
    ordered = select(BuyerRequest.buyer_id).order_by(BuyerRequest.requested_at, BuyerRequest.buyer_id)
    return list(session.scalars(ordered))


def wanted_feed_sets(session: Session) -> set[str]:
    """The `feed_set`s of the `all` views that waiting buyers will read: a view being
    built for a buyer is kept though nobody reads it yet (`builds.prune`)."""
    sets = set()
    for buyer in session.scalars(select(Buyer).join(BuyerRequest, BuyerRequest.buyer_id == Buyer.id)):
        sets |= {key.feed_set for key in wanted(session, buyer).view_keys()}
    return sets


def describe(session: Session, buyer: Buyer) -> dict:
    """What the buyer has and asked for (`lineups buyer show`, `subscription list`):
    their status and wanted status, each subscription's status in effect and the
    status waiting (`requested`), and whether the view of their wanted state is
    ready (`view`: "ready", "building", or "none" when they read nothing)."""
    goal = wanted(session, buyer)
    rows = session.execute(
        select(Feed.id, Feed.name, Subscription.status, Subscription.changed_at)
        .join(Subscription, Subscription.feed_id == Feed.id)
        .where(Subscription.buyer_id == buyer.id)
    ).all()
    requests = {
        feed_id: (status, when)
        for feed_id, status, when in session.execute(
            select(SubscriptionRequest.feed_id, SubscriptionRequest.status, SubscriptionRequest.requested_at)
            .where(SubscriptionRequest.buyer_id == buyer.id)
        )
    }
    names = dict(session.execute(select(Feed.id, Feed.name).where(Feed.id.in_(list(requests)))).all())
    subscriptions = {
        feed_id: {"feed_id": feed_id, "feed": name, "status": status, "changed_at": format_time(when),
                  "requested": None, "requested_at": None}
        for feed_id, name, status, when in rows
    }
    for feed_id, (status, when) in requests.items():
        entry = subscriptions.setdefault(
            feed_id, {"feed_id": feed_id, "feed": names[feed_id], "status": None, "changed_at": None}
        )
        entry["requested"], entry["requested_at"] = status, format_time(when)
    keys = goal.view_keys()
    view = "none" if not keys else "ready" if views_ready(session, keys) else "building"
    waiting = session.get(BuyerRequest, buyer.id)
    return {
        "id": buyer.id,
        "name": buyer.name,
        "status": buyer.status,
        "wanted_status": goal.status,
        "feeds": sorted(feed.id for feed in accounts.entitled_feeds(session, buyer.id)),
        "wanted_feeds": sorted(goal.feeds),
        "view": view,
        "switched": waiting is None,
        "waiting_since": None if waiting is None else format_time(waiting.requested_at),
        "subscriptions": sorted(subscriptions.values(), key=lambda s: (s["feed"].casefold(), s["feed_id"])),
    }
