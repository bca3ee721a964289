"""Incremental re-merge (issue 3, caching): after an ingest, merging again only the
touched merge keys gives exactly the rows of a full merge (C2.2: groups never cross a
merge key), both in the engine (`store.remerge`) and in the lineup service's caches."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from merge_records import FEED_A, FEED_B, FEED_C, frame, record
from sqlalchemy import select

from store import accounts, columns, commodities, demo, ingest, remerge, validate
from store.db import transaction
from store.lineups import LineupService, warm_up
from store.merge import merge
from store.query import LineupQuery
from store.records import load_records
from store.schema import Buyer, Feed, Record

MODES = ("all", "by_source")


def assert_same_rows(actual: pd.DataFrame, expected: pd.DataFrame) -> None:
    """Equal merged rows, whatever their order (it carries no meaning before C3) and
    whatever unused categories a text column carries (`store.columns`)."""
    def ordered(rows: pd.DataFrame) -> pd.DataFrame:
        rows = rows.sort_values("id", kind="stable").reset_index(drop=True)
        return rows.assign(**{c: columns.objects(rows[c]) for c in rows.columns if columns.is_coded(rows[c])})

    assert actual["id"].is_unique
    pd.testing.assert_frame_equal(ordered(actual), ordered(expected))


# ---------------------------------------------------------------- the engine
def _records(draw, refs: list[str]) -> list[dict]:
    out = []
    for ref in refs:
        days = draw(st.integers(0, 20))
        out.append(
            record(
                ref,
                source_id=draw(st.sampled_from([FEED_A, FEED_B, FEED_C])),
                vessel_key=draw(st.sampled_from(["IMO9074729", "NAME:OCEAN GRACE"])),
                port_unlocode=draw(st.sampled_from(["NLRTM", "BEANR"])),
                eta=None if draw(st.integers(0, 9)) == 0 else f"2024-03-{1 + days:02d}T06:00:00Z",
                shipper=draw(st.sampled_from([None, "Acme", "Beta"])),
                quantity=draw(st.sampled_from([None, 1000.0, 2000.0])),
                updated_at=f"2024-02-{1 + draw(st.integers(0, 3)):02d}T00:00:00Z",
            )
        )
    return out


@st.composite
def ingests(draw):
    """(records before, the changed and new records) in one random scenario."""
    before = _records(draw, [f"r{i}" for i in range(draw(st.integers(0, 16)))])
    changed_refs = draw(st.lists(st.sampled_from([r["ref"] for r in before]), unique=True)) if before else []
    new_refs = [f"n{i}" for i in range(draw(st.integers(0, 4)))]
    changes = _records(draw, changed_refs + new_refs)
    for change, old in zip(changes, [r for ref in changed_refs for r in before if r["ref"] == ref]):
        change["source_id"] = old["source_id"]  # a ref belongs to its feed
        change["source_name"] = old["source_name"]
        if draw(st.integers(0, 5)) == 0:  # the commodity became blank: never served (C1)
            change["commodity"] = change["commodity_key"] = None
    return before, changes


def _by_feed(rows: list[dict]) -> dict[str, pd.DataFrame]:
    return {feed: frame(*[r for r in rows if r["source_id"] == feed]) for feed in (FEED_A, FEED_B, FEED_C)}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ingests(), st.sampled_from(MODES))
def test_merging_the_touched_keys_again_equals_a_full_merge(scenario, mode):
    before, changes = scenario
    old_parts, delta = _by_feed(before), _by_feed(changes)
    merged_before = merge(pd.concat(old_parts.values(), ignore_index=True), mode)
    parts, touched = [], []
    for feed, part in old_parts.items():
        updated, keys, touched_keys = remerge.splice(part, remerge.key_hashes(part), delta[feed])
        assert (keys == remerge.key_hashes(updated)).all()
        parts.append((updated, keys))
        touched.append(touched_keys)
    rows, keys = remerge.remerge(
        merged_before, remerge.key_hashes(merged_before), parts, np.concatenate(touched), mode, max_share=1.0
    )
    assert (keys == remerge.key_hashes(rows)).all()
    assert_same_rows(rows, merge(pd.concat([p for p, _ in parts], ignore_index=True), mode))


def test_a_record_that_moves_to_another_key_leaves_its_old_group():
    part = frame(record("a", eta="2024-03-01T06:00:00Z"), record("b", eta="2024-03-02T06:00:00Z"))
    merged_before = merge(part)
    assert merged_before["_members"].tolist() == [2]
    moved = frame(record("b", port_unlocode="BEANR", eta="2024-03-02T06:00:00Z"))
    updated, keys, touched = remerge.splice(part, remerge.key_hashes(part), moved)
    assert len(touched) == 2  # the old key and the new one
    rows, _ = remerge.remerge(merged_before, remerge.key_hashes(merged_before), [(updated, keys)], touched, "all", 1.0)
    assert sorted(rows["port_unlocode"]) == ["BEANR", "NLRTM"]
    assert_same_rows(rows, merge(updated))


def test_keys_that_share_a_hash_are_merged_again_with_the_same_rows(monkeypatch):
    monkeypatch.setattr(remerge, "key_hashes", lambda frame: np.zeros(len(frame), dtype=np.uint64))
    part = frame(record("a"), record("b", port_unlocode="BEANR"), record("c", port_unlocode="BEANR"))
    merged_before = merge(part)
    changed = frame(record("a", quantity=5.0))
    updated, keys, touched = remerge.splice(part, remerge.key_hashes(part), changed)
    rows, _ = remerge.remerge(merged_before, remerge.key_hashes(merged_before), [(updated, keys)], touched, "all", 1.0)
    assert_same_rows(rows, merge(updated))


def test_too_many_changes_ask_for_a_full_merge():
    part = frame(record("a"), record("b", port_unlocode="BEANR"))
    updated, keys, touched = remerge.splice(part, remerge.key_hashes(part), frame(record("a", quantity=5.0)))
    merged = merge(part)
    assert remerge.remerge(merged, remerge.key_hashes(merged), [(updated, keys)], touched, "all", 0.25) is None


# ---------------------------------------------------------------- the service
@pytest.fixture
def visible_demo(sessions):
    """A small demo store whose every feed the demo buyer sees."""
    with transaction(sessions) as session:
        payload = demo.load_demo(session, 600, 7, dt.date(2024, 3, 1))
        buyer = session.get(Buyer, payload["buyer_id"])
        for feed in payload["feeds"]:
            accounts.set_subscription(session, buyer, session.get(Feed, feed["id"]), "active")
    return payload


def _feed_file(session, feed_id: str) -> pd.DataFrame:
    """The feed's stored records as a feed file would carry them (strings)."""
    columns = ("ref", "port_unlocode", "vessel_imo", "vessel_name", "commodity", "quantity", "eta", "etb", "etd", "shipper")
    rows = session.execute(select(*(getattr(Record, c) for c in columns)).where(Record.feed_id == feed_id).order_by(Record.ref))
    out = pd.DataFrame(rows.all(), columns=list(columns))
    for column in ("eta", "etb", "etd"):
        out[column] = pd.to_datetime(out[column]).dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    out["quantity"] = out["quantity"].map(lambda q: "" if pd.isna(q) else f"{q:.0f}")
    return out.astype(object).where(out.notna(), "")


def _ingest(sessions, feed_id: str, rows: pd.DataFrame) -> ingest.IngestReport:
    with transaction(sessions) as session:
        clean = validate.validate_frame(rows.assign(_line=np.arange(2, len(rows) + 2)), name="changes.csv")
        return ingest.upsert(session, session.get(Feed, feed_id), clean)


def _visible(session, service, buyer_id):
    feeds = service.feeds_for(session, buyer_id, None)
    return feeds, load_records(session, [f.id for f in feeds])


@pytest.fixture
def remerges(monkeypatch) -> list:
    """The results of `store.remerge.remerge` as the service calls it (None: it
    chose a full merge)."""
    results = []
    original = remerge.remerge

    def spy(*args, **kwargs):
        results.append(original(*args, **kwargs))
        return results[-1]

    monkeypatch.setattr(remerge, "remerge", spy)
    return results


def test_after_an_ingest_the_service_merges_the_touched_keys_again(sessions, visible_demo, remerges, monkeypatch):
    monkeypatch.setattr(remerge, "INCREMENTAL_SHARE", 1.0)
    service, buyer_id = LineupService(), visible_demo["buyer_id"]
    with sessions() as session:
        feeds, _ = _visible(session, service, buyer_id)
        for mode in MODES:
            service.merged(session, feeds, mode)
        feed_id = feeds[0].id
        stored = _feed_file(session, feed_id)
    changes = stored.iloc[:12].copy()
    changes.loc[changes.index[:4], "quantity"] = "12340"  # revised values
    changes.loc[changes.index[4:6], "eta"] = "2024-03-20T06:00:00Z"  # a slipped ETA
    changes.loc[changes.index[6], "port_unlocode"] = "NLRTM"  # moved to another key
    changes.loc[changes.index[7], "commodity"] = "N/A"  # blank: no longer served (C1)
    added = stored.iloc[12:15].assign(ref=["NEW-1", "NEW-2", "NEW-3"])  # new records
    report = _ingest(sessions, feed_id, pd.concat([changes.iloc[:8], added], ignore_index=True))
    assert (report.inserted, report.updated) == (3, 8)

    with sessions() as session:
        feeds, records = _visible(session, service, buyer_id)
        for mode in MODES:
            assert_same_rows(service.merged(session, feeds, mode), merge(records, mode))
    assert len(remerges) == 2 and all(r is not None for r in remerges)
    assert len(service._merged.items) == 2  # the older results were let go


def test_a_commodity_mapping_is_merged_in_incrementally(sessions, visible_demo, remerges, monkeypatch):
    monkeypatch.setattr(remerge, "INCREMENTAL_SHARE", 1.0)
    service, buyer_id = LineupService(), visible_demo["buyer_id"]
    with sessions() as session:
        feeds, _ = _visible(session, service, buyer_id)
        service.merged(session, feeds, "all")
        raw = commodities.unresolved(session)[0]["raw"]
    with transaction(sessions) as session:
        assert commodities.map_commodity(session, raw, "Soybeans")["records_resolved"] > 0
    with sessions() as session:
        feeds, records = _visible(session, service, buyer_id)
        rows = service.merged(session, feeds, "all")
        assert_same_rows(rows, merge(records, "all"))
    assert remerges and remerges[-1] is not None
    assert (rows["commodity_normalized"] == "Soybeans").any()


def test_selections_of_the_new_versions_hold_the_ingested_rows(sessions, visible_demo):
    service, buyer_id = LineupService(), visible_demo["buyer_id"]
    query = LineupQuery()
    with sessions() as session:
        before = service.select(session, buyer_id, query)
        feed_id = service.feeds_for(session, buyer_id, None)[0].id
        stored = _feed_file(session, feed_id)
    _ingest(sessions, feed_id, stored.iloc[:1].assign(ref="NEW-1", eta="2031-01-01T00:00:00Z", etb="", etd=""))
    with sessions() as session:
        after = service.select(session, buyer_id, query)
        latest = service.merged(session, service.feeds_for(session, buyer_id, None), "all")
    assert len(after) == len(latest) == len(before) + 1  # a call of its own
    assert after.rows["combined_date"].dropna().iloc[-1] == pd.Timestamp("2031-01-01T00:00:00Z")


def test_warming_makes_each_buyers_default_view_and_stops_when_the_cache_is_full(sessions, visible_demo):
    buyer_id = visible_demo["buyer_id"]
    with transaction(sessions) as session:
        entitled = accounts.entitled_feeds(session, buyer_id)
        others = [accounts.add_buyer(session, f"Buyer of one feed {i}") for i in range(2)]
        for other, feed in zip(others, entitled):  # two other sets of feeds
            accounts.set_subscription(session, other, session.get(Feed, feed.id), "active")
        other_ids = [o.id for o in others]
    service = LineupService(merged_entries=2)
    assert service.cached(entitled, LineupQuery()) is None

    def read(work):
        with transaction(sessions) as session:
            return work(session)

    with transaction(sessions) as session:
        assert service.warm(session, [buyer_id, *other_ids]) == 2  # the third set would evict the first
        first_other = accounts.entitled_feeds(session, other_ids[0])
        second_other = accounts.entitled_feeds(session, other_ids[1])
    warmed = service.cached(entitled, LineupQuery())
    assert warmed is not None and len(warmed) > 0
    assert service.cached(first_other, LineupQuery(format="csv")) is not None  # CSV pages share the rows
    assert service.cached(second_other, LineupQuery()) is None
    with transaction(sessions) as session:  # the same rows as a request that merges them itself
        fresh = LineupService().select(session, buyer_id, LineupQuery(), entitled)
    assert warmed.rows["id"].tolist() == fresh.rows["id"].tolist()

    cold = LineupService()
    warm_up(cold, read, 0)  # 0: nothing
    warm_up(cold, read, 8, stopping=lambda: True)  # the server stopped before it began
    assert cold.cached(entitled, LineupQuery()) is None
    warm_up(cold, read, 8)
    assert cold.cached(entitled, LineupQuery()) is not None
