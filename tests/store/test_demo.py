"""The demo data set (issue 2): deterministic, realistic enough that merging has work
to do, with a buyer whose key works. On SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict

import pytest
from sqlalchemy import func, select

from store.access import accounts

from store.intake import demo
from store.fields import CONTENT_FIELDS
from store.normalize import imo_is_valid, vessel_name_key
from store.reference.ports import default_directory
from store.database.schema import Feed, FeedPort, Record, Subscription

ANCHOR = dt.date(2024, 3, 1)


def snapshot(session) -> list[tuple]:
    """Every stored record's feed name, ref and content, in a stable order."""
    columns = [getattr(Record, f) for f in CONTENT_FIELDS]
    rows = session.execute(
        select(Feed.name, Record.ref, *columns, Record.commodity_leaf)
        .join(Feed, Feed.id == Record.feed_id)
        .order_by(Feed.name, Record.ref)
    )
    return [tuple(r) for r in rows]


def load_and_snapshot(sessions, **kwargs) -> list[tuple]:
    """Load the demo into the empty store, take its records, and roll it back."""
    with sessions() as session:
        demo.load_demo(session, **kwargs)
        taken = snapshot(session)
        session.rollback()
    return taken


def test_demo_is_deterministic_for_a_seed_and_anchor(sessions):
    first = load_and_snapshot(sessions, records=400, seed=11, anchor=ANCHOR)
    second = load_and_snapshot(sessions, records=400, seed=11, anchor=ANCHOR)
    assert len(first) == 400
    assert first == second
    other_seed = load_and_snapshot(sessions, records=400, seed=12, anchor=ANCHOR)
    assert other_seed != first
    later = load_and_snapshot(sessions, records=400, seed=11, anchor=ANCHOR + dt.timedelta(days=10))
    etas = [r[CONTENT_FIELDS.index("eta") + 2] for r in first]
    later_etas = [r[CONTENT_FIELDS.index("eta") + 2] for r in later]
    assert [e + dt.timedelta(days=10) if e else None for e in etas] == later_etas


@pytest.mark.parametrize("records", [10, 49, 333])
def test_demo_loads_exactly_the_records_asked_for(session, records):
    result = demo.load_demo(session, records=records, seed=7, anchor=ANCHOR)
    assert result["records"] == records == sum(f["records"] for f in result["feeds"])
    assert session.scalar(select(func.count()).select_from(Record)) == records


def test_demo_default_is_realistic(session):
    result = demo.load_demo(session, anchor=ANCHOR)

    assert result["records"] >= 5000
    assert session.scalar(select(func.count()).select_from(Record)) == result["records"]
    assert len(result["feeds"]) >= 5
    codes = set(session.scalars(select(FeedPort.unlocode)))
    directory = default_directory()
    assert len(codes) >= 10 and all(code in directory for code in codes)
    assert len({directory.get(code).country_name for code in codes}) >= 5
    records = session.execute(select(Record)).scalars().all()
    assert {r.port_unlocode for r in records} <= codes

    imos = [r.vessel_imo for r in records if r.vessel_imo]
    assert len(imos) > 0.8 * len(records)
    assert all(imo_is_valid(imo) for imo in imos)
    assert any(r.vessel_imo is None for r in records)  # some feeds only name the ship

    # Blanks in the feeds (N/A, TBC, TBN, empty) are stored as NULL.
    for field in ("etb", "etd", "shipper", "receiver", "quantity", "dwt"):
        assert any(getattr(r, field) is None for r in records), field

    # The same ship is spelled differently by different feeds; prefixes and case
    # normalize away (C2.2), a hyphenated name does not.
    spellings = defaultdict(set)
    for r in records:
        if r.vessel_imo:
            spellings[r.vessel_imo].add(r.vessel_name)
    varied = [names for names in spellings.values() if len(names) > 1]
    assert varied
    assert any(name.startswith(("MV ", "M/V ")) for names in varied for name in names)
    assert any(len({vessel_name_key(n) for n in names}) < len(names) for names in varied)

    # Commodities come in several spellings that resolve to one leaf; a few stay unresolved.
    by_leaf = defaultdict(set)
    for r in records:
        by_leaf[r.commodity_leaf].add(r.commodity)
    assert len(by_leaf["dry-bulk/grains/soybeans"]) >= 3
    assert by_leaf[None] == {"OUTROS"}


def test_demo_feed_files_carry_blank_words():
    calls = demo.build_calls(7, 3000, ANCHOR)
    cells = set()
    for index in range(len(demo.DEMO_FEEDS)):
        frame = demo.feed_rows(calls, index, 7)
        cells.update(frame[["etb", "shipper", "quantity"]].to_numpy().ravel())
    assert {"N/A", "TBC", "TBN", ""} <= cells


def test_demo_buyer_subscriptions_and_key(session):
    result = demo.load_demo(session, records=60, seed=7, anchor=ANCHOR)

    buyer = accounts.authenticate(session, result["api_key"])
    assert buyer.id == result["buyer_id"] and buyer.name == "Demo Buyer"
    statuses = dict(
        session.execute(
            select(Feed.name, Subscription.status)
            .join(Subscription, Subscription.feed_id == Feed.id)
            .where(Subscription.buyer_id == buyer.id)
        ).all()
    )
    assert statuses == {f["name"]: f["subscription"] for f in result["feeds"]}
    assert {"active", "trial", "cancelled"} <= set(statuses.values())
    entitled = {e.feed.name for e in accounts.entitlements(session, buyer.id)}
    assert entitled == {name for name, status in statuses.items() if status != "cancelled"}


def test_demo_refuses_a_store_that_has_it_already(session):
    demo.load_demo(session, records=20, seed=7, anchor=ANCHOR)
    with pytest.raises(Exception) as caught:
        demo.load_demo(session, records=20, seed=7, anchor=ANCHOR)
    assert getattr(caught.value, "code", None) == "VALIDATION_ERROR"


def test_demo_looks_like_a_real_market(session):
    """Issue 18.11: berths named, each feed reports its own trade, each vessel keeps one
    type and deadweight and carries no more than that."""
    demo.load_demo(session, records=3000, anchor=ANCHOR)
    rows = session.execute(
        select(Feed.name, Record.berth_terminal, Record.vessel_type, Record.commodity_leaf, Record.vessel_imo,
               Record.dwt, Record.quantity, Record.quantity_unit).join(Feed, Feed.id == Record.feed_id)
    ).all()
    by_feed = defaultdict(list)
    for r in rows:
        by_feed[r.name].append(r)
    for name, records in by_feed.items():
        assert sum(r.berth_terminal is not None for r in records) > 0.7 * len(records), name
    tanker = by_feed["Global Tanker Tracker"]
    assert {r.vessel_type for r in tanker} <= {"Tanker", "LNG Carrier", "LPG Carrier"}
    assert all(r.commodity_leaf.startswith(("liquid-bulk/", "gas/", "bunkers-ship-supplies/")) for r in tanker)
    assert {r.vessel_type for r in by_feed["Brazil Grains Lineup"]} == {"Bulk Carrier"}
    assert {r.commodity_leaf.split("/")[1] for r in by_feed["Iron Ore Watch"]} == {"iron-ore"}
    types, dwts = defaultdict(set), defaultdict(set)
    for r in rows:
        if r.vessel_imo:
            types[r.vessel_imo].add(r.vessel_type)
            if r.dwt is not None:
                dwts[r.vessel_imo].add(r.dwt)
        if r.dwt and r.quantity and r.quantity_unit == "MT":
            assert r.quantity <= r.dwt
    assert all(len(t) == 1 for t in types.values()) and all(len(d) == 1 for d in dwts.values())


def test_demo_keeps_its_two_kinds_of_near_duplicates(session):
    """The rows issue 19 will resolve: the same call once with an IMO number and once by
    name only, and once as "Iron Ore (Unspecified)" and once as a specific leaf."""
    demo.load_demo(session, records=3000, anchor=ANCHOR)
    calls = defaultdict(list)  # (name key, port, eta day) -> records
    for r in session.execute(select(Record)).scalars():
        if r.eta is not None:
            calls[(vessel_name_key(r.vessel_name), r.port_unlocode, r.eta.date())].append(r)
    with_and_without_imo = [c for c in calls.values() if {r.vessel_imo is None for r in c} == {True, False}]
    assert with_and_without_imo
    unspecified = "dry-bulk/iron-ore/iron-ore-unspecified"
    iron_ore_twice = [
        c for c in calls.values()
        if unspecified in {r.commodity_leaf for r in c}
        and any(r.commodity_leaf.startswith("dry-bulk/iron-ore/") and r.commodity_leaf != unspecified for r in c)
    ]
    assert iron_ore_twice
