"""Subscription changes built in the background (issue 47): a change is committed as
what the buyer wants; the buyer reads their previous feeds until the view of the new
ones is built and they are switched to it, then the new ones, never a mix; changes
in a row build one view; what removes access takes effect at once; a view no buyer
ever read is dropped as soon as no buyer can read it. On SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import select

from store.access import accounts
from store.database.db import transaction
from store.database.schema import Buyer, Feed, MergedView, Subscription, ViewRead
from store.intake import demo
from store.views import builder, builds, pending, upkeep
from store.views.lineups import Lineups
from store.query import LineupQuery
from tests.paused_build import paused_build
from tests.store.test_views import comparable, read_by, reference


@pytest.fixture
def store(sessions) -> dict:
    """A demo store of 400 records and a buyer "Changer" of its first two feeds, whose
    views are built and read: `feeds` (the demo buyer's feed ids, by name), `buyer`."""
    with transaction(sessions) as session:
        payload = demo.load_demo(session, 400, 7, dt.date(2024, 3, 1))
        feed_ids = [f.id for f in accounts.entitled_feeds(session, payload["buyer_id"])]
        buyer = accounts.add_buyer(session, "Changer")
        for feed_id in feed_ids[:2]:
            accounts.set_subscription(session, buyer, session.get(Feed, feed_id), "active")
        buyer_id = buyer.id
    builds.ensure_buyer(sessions, buyer_id)
    read_by(sessions, buyer_id)
    return {"feeds": feed_ids, "buyer": buyer_id}


def request(sessions, buyer_id: str, feed_ids: list[str], status: str) -> bool:
    """What `lineups subscription set` does without --wait: the request, then the
    switch when no view needs building; whether the change is in effect."""
    with transaction(sessions) as session:
        buyer = session.get(Buyer, buyer_id)
        pending.request_subscriptions(session, buyer, [session.get(Feed, f) for f in feed_ids], status)
    with transaction(sessions) as session:
        return pending.switch(session, buyer_id)


def seen(sessions, buyer_id: str) -> list[tuple]:
    return comparable(Lineups(sessions).frame(buyer_id, LineupQuery()))


def effective(sessions, buyer_id: str) -> set[str]:
    with transaction(sessions) as session:
        return {feed.id for feed in accounts.entitled_feeds(session, buyer_id)}


def all_views(sessions) -> set[tuple[str, ...]]:
    with transaction(sessions) as session:
        rows = session.execute(select(MergedView.mode, MergedView.feeds))
        return {tuple(feeds) for mode, feeds in rows if mode == "all"}


def test_the_buyer_reads_their_previous_feeds_until_the_switch_then_the_new_ones(sessions, store_settings, store):
    buyer, feeds = store["buyer"], store["feeds"]
    before = seen(sessions, buyer)
    assert before == comparable(reference(sessions, buyer, LineupQuery()))
    assert request(sessions, buyer, [feeds[2]], "active") is False
    assert effective(sessions, buyer) == set(feeds[:2])
    assert seen(sessions, buyer) == before  # the previous feeds, read from their view
    with transaction(sessions) as session:
        assert pending.describe(session, session.get(Buyer, buyer))["view"] == "building"
    if sessions.kw["bind"].dialect.name == "postgresql":  # SQLite: a build holds the one write lock
        with paused_build(store_settings, upkeep.ViewKey.of("all", feeds[:3])):  # another process builds it
            assert request(sessions, buyer, [feeds[2]], "trial") is False  # commands still commit meanwhile
            assert builder.build_waiting(sessions, wait=0).waiting == [buyer]  # held elsewhere: left waiting
            assert seen(sessions, buyer) == before
    assert builder.build_waiting(sessions).switched == [buyer]
    assert effective(sessions, buyer) == set(feeds[:3])
    after = seen(sessions, buyer)
    assert after == comparable(reference(sessions, buyer, LineupQuery())) and after != before
    with transaction(sessions) as session:
        described = pending.describe(session, session.get(Buyer, buyer))
    assert (described["view"], described["switched"], described["waiting_since"]) == ("ready", True, None)


def test_five_changes_in_a_row_build_one_view(sessions, store, caplog):
    buyer, feeds = store["buyer"], store["feeds"]
    views_before = all_views(sessions)
    for feed_id in feeds[2:5]:
        assert request(sessions, buyer, [feed_id], "active") is False
    assert request(sessions, buyer, [feeds[3]], "trial") is False  # still waiting: only the request changes
    assert request(sessions, buyer, [feeds[1]], "trial") is False  # the others still wait
    assert effective(sessions, buyer) == set(feeds[:2]) and all_views(sessions) == views_before
    with transaction(sessions) as session:  # a feed they read: no new feed set, in effect at once
        assert session.get(Subscription, (buyer, feeds[1])).status == "trial"
    with caplog.at_level("INFO", logger="lineups.views"):
        assert builder.build_waiting(sessions).switched == [buyer]
    assert all_views(sessions) - views_before == {tuple(sorted(feeds))}
    assert caplog.text.count("(all) brought up to date") == 1
    with transaction(sessions) as session:
        statuses = dict(session.execute(
            select(Subscription.feed_id, Subscription.status).where(Subscription.buyer_id == buyer)).all())
    assert statuses == {feeds[0]: "active", feeds[1]: "trial", feeds[2]: "active", feeds[3]: "trial",
                        feeds[4]: "active"}
    assert seen(sessions, buyer) == comparable(reference(sessions, buyer, LineupQuery()))


def test_a_change_made_while_the_view_is_built_is_built_for_too(sessions, store, monkeypatch):
    buyer, feeds = store["buyer"], store["feeds"]
    request(sessions, buyer, [feeds[2]], "active")
    real_ensure = builds.ensure
    changed = []

    def ensure_then_change(sessions_, key, wait=builds.WAIT_S):
        view_id = real_ensure(sessions_, key, wait)
        if not changed:  # the operator changes again once the first view is built, before the switch
            changed.append(request(sessions, buyer, [feeds[3]], "active"))
        return view_id

    monkeypatch.setattr(builds, "ensure", ensure_then_change)
    assert builder.settle(sessions, buyer) is True
    assert changed == [False] and effective(sessions, buyer) == set(feeds[:4])


def test_cancellation_and_suspension_take_effect_at_once(sessions, store):
    buyer, feeds = store["buyer"], store["feeds"]
    request(sessions, buyer, [feeds[2]], "active")  # waits for its view
    request(sessions, buyer, [feeds[1]], "cancelled")
    assert effective(sessions, buyer) == {feeds[0]}  # the cancelled feed gone at once, the new one waiting
    assert seen(sessions, buyer) == comparable(reference(sessions, buyer, LineupQuery()))
    with transaction(sessions) as session:
        pending.request_buyer_status(session, session.get(Buyer, buyer), "suspended")
    with transaction(sessions) as session:
        assert session.get(Buyer, buyer).status == "suspended"
        assert pending.switch(session, buyer)  # a suspended buyer reads nothing: no view to wait for
    assert effective(sessions, buyer) == {feeds[0], feeds[2]}
    with transaction(sessions) as session:  # resumed once their view is ready
        pending.request_buyer_status(session, session.get(Buyer, buyer), "active")
    with transaction(sessions) as session:
        assert pending.switch(session, buyer) is False and session.get(Buyer, buyer).status == "suspended"
    assert builder.build_waiting(sessions).switched == [buyer]
    with transaction(sessions) as session:
        assert session.get(Buyer, buyer).status == "active"


def test_a_view_no_buyer_read_is_dropped_at_once_and_a_read_one_kept(sessions, store):
    buyer, feeds = store["buyer"], store["feeds"]
    read_key = upkeep.ViewKey.of("all", feeds[:2])  # the buyer read it (`store`)
    request(sessions, buyer, [feeds[2]], "active")
    builder.build_waiting(sessions)  # switched to a view they do not read before changing again
    unread = upkeep.ViewKey.of("all", feeds[:3])
    request(sessions, buyer, [feeds[3]], "active")
    builder.build_waiting(sessions)
    with transaction(sessions) as session:
        kept = {v.feed_set: v for v in session.scalars(select(MergedView))}
        assert unread.feed_set not in kept  # never read, no one can read it: gone
        assert kept[read_key.feed_set].unused_since is not None  # read: kept for the retention
        assert session.get(ViewRead, kept[read_key.feed_set].id) is not None
