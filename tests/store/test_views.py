"""Merged views kept in the database (issue 15): every view equals the merge of its
visible records, after any sequence of ingests, revisions, commodity mappings and
subscription changes; views are built once across processes, taken over from a
process that died, kept up to date by the vessels a change touched, and dropped when
no buyer can read them any longer. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import threading
import time

import numpy as np
import pandas as pd
import pytest
from pipeline_reference import select as reference_select
from sqlalchemy import func, select, update

from store.access import accounts
from store.access.usage import UsageWriter

from store.intake import demo, feeds, ingest, validate

from store.merging import merge
from store.normalize import name_key

from store.intake import commodities
from store.database.db import transaction
from store.query import LineupQuery, parse_query
from store.views.records import load_records
from store.database.schema import Buyer, Feed, MergedRow, MergedView, Record, VesselChange
from store.reference.taxonomy import default_taxonomy
from store.views import builds, changelog, merges, stored, upkeep
from store.views.lineups import PAUSES_S, Lineups, patiently
from tests.paused_build import paused_build

PORTS = ("NLRTM", "BEANR", "BRSSZ")
COMMODITIES = ("Soybeans", "wheat", "steam coal", "Iron ore fines", "mystery cargo")
COMPANIES = (None, "Acme Trading", "Beta Grains")
#: The queries asked after every step: filters, latest, both modes, dates, a feed.
QUERIES = (
    {},
    {"merge": "by_source"},
    {"latest": "true"},
    {"latest": "true", "merge": "by_source", "port": "NLRTM"},
    {"latest": "true", "merge": "by_source", "commodity": "Dry Bulk"},
    {"commodity": "Dry Bulk"},
    {"commodity": "Soybeans,Coal", "latest": "true"},
    {"country": "Belgium"},
    {"port_name": "rotter"},
    {"from": "2024-03-10", "to": "2024-03-20"},
    {"from": "2024-03-25", "latest": "true"},
    {"status": "berthed", "latest": "true"},
)
#: Compared beside the id (which already encodes key, anchor and counterparties, C2.7).
VALUE_COLUMNS = ("source_id", "source_name", "vessel_name", "quantity", "eta", "etd", "updated_at", "commodity_normalized")


def feed_file(rng: np.random.Generator, refs: list[str], vessels: list[tuple[str, str]]) -> pd.DataFrame:
    """Random feed-file rows (text, as read from a CSV) for `refs`."""
    rows = []
    for ref in refs:
        imo, name = vessels[rng.integers(len(vessels))]
        day = int(rng.integers(1, 40))
        arrival = dt.datetime(2024, 3, 1) + dt.timedelta(days=day, hours=int(rng.integers(0, 24)))
        eta, etd = (t.strftime("%Y-%m-%dT%H:%M:%SZ") for t in (arrival, arrival + dt.timedelta(days=int(rng.integers(1, 9)))))
        rows.append({
            "ref": ref,
            "port_unlocode": PORTS[rng.integers(len(PORTS))],
            "vessel_imo": imo if rng.random() < 0.7 or name == "TBN" else "",
            "vessel_name": name,
            "commodity": COMMODITIES[rng.integers(len(COMMODITIES))] if rng.random() < 0.95 else "",
            "quantity": str(int(rng.integers(1, 60)) * 1000) if rng.random() < 0.8 else "",
            "eta": eta if rng.random() < 0.9 else "",
            "etd": "" if rng.random() < 0.5 else etd,
            "shipper": COMPANIES[rng.integers(len(COMPANIES))] or "",
            "vessel_status": ("expected", "berthed")[rng.integers(2)],
        })
    return pd.DataFrame(rows, dtype=object)


def upsert(sessions, feed_id: str, rows: pd.DataFrame) -> ingest.IngestReport:
    with transaction(sessions) as session:
        return upsert_in(session, feed_id, rows)


def upsert_in(session, feed_id: str, rows: pd.DataFrame) -> ingest.IngestReport:
    """`upsert` in the caller's transaction."""
    clean = validate.validate_frame(rows.assign(_line=np.arange(2, len(rows) + 2)), name="feed.csv")
    return ingest.upsert(session, session.get(Feed, feed_id), clean)


def reference(sessions, buyer_id: str, query: LineupQuery) -> pd.DataFrame:
    """What the buyer should see: the C3 pipeline over `merge.merge` of the records of
    the feeds they may see now (C2.1)."""
    with transaction(sessions) as session:
        visible = [f.id for f in accounts.entitled_feeds(session, buyer_id) if query.source in (None, f.id)]
        records = load_records(session, visible)
    return reference_select(merge.merge(records, query.merge), query)


def comparable(rows: pd.DataFrame) -> list[tuple]:
    out = []
    for column in ("id", *VALUE_COLUMNS):
        values = rows[column]
        if isinstance(values.dtype, pd.DatetimeTZDtype):
            values = values.dt.strftime("%Y-%m-%dT%H:%M:%S")
        out.append([None if pd.isna(v) else (v if isinstance(v, (int, float, str)) else str(v)) for v in values])
    return list(zip(*out))


def assert_views_match(sessions, lineups: Lineups, buyers: dict[str, str], feed_ids: list[str]) -> None:
    taxonomy = default_taxonomy()
    for name, buyer_id in buyers.items():
        with transaction(sessions) as session:
            entitled = [f.id for f in accounts.entitled_feeds(session, buyer_id)]
        asked = [*QUERIES, *({"source": feed_id} for feed_id in entitled[:1])]
        for params in asked:
            query = parse_query({k: [v] for k, v in params.items()}, taxonomy.parse_filter)[0]
            expected = reference(sessions, buyer_id, query)
            got = lineups.frame(buyer_id, query)
            assert comparable(got) == comparable(expected), (name, params)
            assert lineups.count(buyer_id, query) == len(expected), (name, params)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_every_view_equals_the_merge_of_its_visible_records_after_random_changes(sessions, seed):
    rng = np.random.default_rng(seed)
    # 30% of records lack the IMO: the views resolve them by name (issue 19 rule 1),
    # when the name carries one IMO number among the view's records: two vessels are
    # named Harmony Pacific.
    names = ["OCEAN GRACE", "MV Star Atlantic", "Harmony Pacific", "TBN", "Dawn Cape", "Sea Lion", "HARMONY PACIFIC"]
    vessels = list(zip(demo.imo_numbers(rng, len(names)), names))
    with transaction(sessions) as session:
        feed_ids = [
            feeds.add_feed(session, name, [port]).id
            for name, port in (("Alpha Lineups", "NLRTM"), ("Bravo Port Data", "BEANR"), ("Charlie Ships", "BRSSZ"))
        ]
        buyers = {name: accounts.add_buyer(session, name).id for name in ("Two feeds", "All feeds")}
        for buyer_name, chosen in (("Two feeds", feed_ids[:2]), ("All feeds", feed_ids)):
            for feed_id in chosen:
                accounts.set_subscription(session, session.get(Buyer, buyers[buyer_name]), session.get(Feed, feed_id), "active")
    lineups = Lineups(sessions)
    refs = {feed_id: [] for feed_id in feed_ids}
    ways: dict[str, int] = {}
    for step in range(7):
        feed_id = feed_ids[int(rng.integers(len(feed_ids)))]
        old = list(rng.choice(refs[feed_id], size=min(len(refs[feed_id]), 4), replace=False)) if refs[feed_id] else []
        new = [f"s{step}-{i}" for i in range(int(rng.integers(3, 12)))]
        refs[feed_id] += new
        report = upsert(sessions, feed_id, feed_file(rng, old + new, vessels))
        for how, count in report.views.items():
            ways[how] = ways.get(how, 0) + count
        if step == 3:  # an operator resolves a commodity: the records change their key (C6)
            with transaction(sessions) as session:
                commodities.map_commodity(session, "mystery cargo", "Soybeans")
        if step == 5:  # a subscription change: the first buyer's feed set changes
            with transaction(sessions) as session:
                accounts.set_subscription(
                    session, session.get(Buyer, buyers["Two feeds"]), session.get(Feed, feed_ids[2]), "trial"
                )
                accounts.set_subscription(
                    session, session.get(Buyer, buyers["Two feeds"]), session.get(Feed, feed_ids[0]), "cancelled"
                )
        assert_views_match(sessions, lineups, buyers, feed_ids)
    # Views existed from the first reads on, so later ingests merged only the vessels
    # they touched (small changes) in their own transaction.
    assert ways.get("incremental", 0) > 0, ways


def test_an_ingest_merges_again_only_the_touched_vessel_port_pairs(sessions, monkeypatch):
    with transaction(sessions) as session:
        payload = demo.load_demo(session, 800, 7, dt.date(2024, 3, 1))
    lineups = Lineups(sessions)
    buyer_id = payload["buyer_id"]
    before = lineups.frame(buyer_id, LineupQuery())
    feed_id = next(f["id"] for f in payload["feeds"] if f["records"])
    with transaction(sessions) as session:
        view = session.scalar(select(MergedView).where(MergedView.mode == "all"))
        rows_before = view.row_count
    rng = np.random.default_rng(3)
    vessels = list(zip(demo.imo_numbers(rng, 2), ["NEW VESSEL ONE", "NEW VESSEL TWO"]))
    noted = []
    original = changelog.note_changes
    monkeypatch.setattr(changelog, "note_changes", lambda s, f, v, keys: (noted.append(set(keys)), original(s, f, v, keys)))
    report = upsert(sessions, feed_id, feed_file(rng, ["fresh-1", "fresh-2", "fresh-3"], vessels))
    assert report.inserted == 3 and report.views["incremental"] >= 1 and report.views["full"] == 0
    with transaction(sessions) as session:
        # The change log named exactly the (vessel, port) pairs of the new records,
        # and linked the names of those with an IMO number to it (issue 19 rule 5)
        # (then it was pruned: every view of the feed reflects it).
        found = session.execute(
            select(Record.vessel_key, Record.port_unlocode, Record.vessel_name).where(Record.ref.like("fresh-%"))
        ).all()
        fresh = {(vessel, port) for vessel, port, _ in found}
        links = {changelog.link(v, name_key(n)) for v, _, n in found if v.startswith("IMO")}
        assert session.scalar(select(func.count()).select_from(VesselChange).where(VesselChange.feed_id == feed_id)) == 0
    assert 1 <= len(fresh) <= 3 and noted == [fresh | links]
    after = lineups.frame(buyer_id, LineupQuery())
    assert set(before["id"]) <= set(after["id"]) and len(after) > len(before)
    assert comparable(after) == comparable(reference(sessions, buyer_id, LineupQuery()))
    with transaction(sessions) as session:
        assert session.get(MergedView, view.id).row_count > rows_before


def _rows_of(lineups: Lineups, buyer_id: str) -> list[tuple]:
    rows = lineups.frame(buyer_id, LineupQuery())
    return sorted(zip(rows["id"], rows["vessel_imo"].astype(object), rows["source_name"].astype(object)))


def _one_row(port: str, imo: str, name: str, ref: str = "r1", commodity: str = "wheat") -> pd.DataFrame:
    return pd.DataFrame([{
        "ref": ref, "port_unlocode": port, "vessel_imo": imo, "vessel_name": name, "commodity": commodity,
        "eta": "2024-03-10T06:00:00Z", "quantity": "60000",
    }], dtype=object)


def test_issue_19_rule_1_a_feed_the_buyer_cannot_see_teaches_no_imo_and_changes_no_row(sessions, monkeypatch):
    with transaction(sessions) as session:
        alpha = feeds.add_feed(session, "Alpha Lineups", ["BRSSZ"]).id
        bravo = feeds.add_feed(session, "Bravo Port Data", ["BRSSZ"]).id
        names_only = accounts.add_buyer(session, "Sees Bravo").id
        both = accounts.add_buyer(session, "Sees both").id
        for buyer_id, chosen in ((names_only, [bravo]), (both, [alpha, bravo])):
            for feed_id in chosen:
                accounts.set_subscription(session, session.get(Buyer, buyer_id), session.get(Feed, feed_id), "active")
    lineups = Lineups(sessions)
    upsert(sessions, bravo, _one_row("BRSSZ", "", "Harmony Pacific", "b1"))
    before = _rows_of(lineups, names_only)
    _rows_of(lineups, both)  # both views exist: the ingest below keeps them up to date
    upsert(sessions, alpha, _one_row("NLRTM", "9345934", "HARMONY PACIFIC", "a1"))
    assert _rows_of(lineups, names_only) == before  # the invisible IMO changes nothing
    frame = lineups.frame(names_only, LineupQuery())
    assert list(frame["vessel_imo"].astype(object)) == [None]
    with transaction(sessions) as session:
        keys = set(session.scalars(select(MergedRow.vessel_key)))
    assert keys == {"NAME:HARMONY PACIFIC", "IMO9345934"}  # Bravo's row: a name in one view, the IMO in the other
    seen = lineups.frame(both, LineupQuery())
    assert len(seen) == 2  # at NLRTM and BRSSZ
    assert comparable(seen) == comparable(reference(sessions, both, LineupQuery()))
    # Bravo revises its record: both views merge Harmony's pairs again (incremental
    # upkeep, with the identities of each view's own feeds): still no IMO for the
    # buyer who does not see Alpha.
    monkeypatch.setattr(upkeep, "INCREMENTAL_SHARE", 10.0)  # one-row views: merged in part all the same
    report = upsert(sessions, bravo, _one_row("BRSSZ", "", "Harmony Pacific", "b1").assign(quantity="61000"))
    assert report.views["incremental"] == 2 and report.views["full"] == 0, report.views
    for buyer_id in (names_only, both):
        assert comparable(lineups.frame(buyer_id, LineupQuery())) == comparable(reference(sessions, buyer_id, LineupQuery()))
    assert list(lineups.frame(names_only, LineupQuery())["vessel_imo"].astype(object)) == [None]
    with transaction(sessions) as session:
        assert set(session.scalars(select(MergedRow.vessel_key))) == {"NAME:HARMONY PACIFIC", "IMO9345934"}


def _two_feeds(sessions) -> tuple[str, str, str]:
    """Feeds Alpha and Bravo at Santos and a buyer who sees both: their ids."""
    with transaction(sessions) as session:
        alpha = feeds.add_feed(session, "Alpha Lineups", ["BRSSZ"]).id
        bravo = feeds.add_feed(session, "Bravo Port Data", ["BRSSZ"]).id
        buyer = accounts.add_buyer(session, "Sees both").id
        for feed_id in (alpha, bravo):
            accounts.set_subscription(session, session.get(Buyer, buyer), session.get(Feed, feed_id), "active")
    return alpha, bravo, buyer


def test_an_update_writes_only_the_rows_that_changed(sessions, monkeypatch):
    """A revision rewrites none of the other rows of its (vessel, port) pair, and a
    row whose key stays is updated in place: what an update writes is most of its
    cost (every row inserted or deleted touches the table and five indexes)."""
    alpha, bravo, buyer = _two_feeds(sessions)
    # One vessel at Santos: three calls in Alpha, the first also in Bravo.
    calls = pd.concat([_one_row("BRSSZ", "9345934", "Harmony Pacific", f"a{i}") for i in range(3)], ignore_index=True)
    calls["eta"] = ["2024-03-10T06:00:00Z", "2024-04-10T06:00:00Z", "2024-05-10T06:00:00Z"]
    upsert(sessions, alpha, calls)
    upsert(sessions, bravo, _one_row("BRSSZ", "9345934", "Harmony Pacific", "b0"))
    lineups = Lineups(sessions)
    for mode in ("all", "by_source"):  # both views exist: the ingest below keeps them up to date
        lineups.frame(buyer, LineupQuery(merge=mode))
    monkeypatch.setattr(upkeep, "INCREMENTAL_SHARE", 10.0)  # small views: merged in part all the same
    written: list[str] = []
    original = stored._execute_many
    monkeypatch.setattr(stored, "_execute_many", lambda c, statement, params: (
        written.extend([statement.split()[0]] * len(params)) if "merged_rows" in statement else None,
        original(c, statement, params),
    ))
    revised = calls.iloc[[2]].assign(quantity="42000")  # the last call's quantity, nothing else
    report = upsert(sessions, alpha, pd.concat([calls.iloc[[0, 1]], revised], ignore_index=True))
    assert report.updated == 1 and report.views["incremental"] == 2, report
    # One row in each view, updated where it is; the pair's two other rows (three in
    # `by_source`) not written at all.
    assert written == ["UPDATE", "UPDATE"]
    for mode in ("all", "by_source"):
        query = LineupQuery(merge=mode)
        rows = lineups.frame(buyer, query)
        assert comparable(rows) == comparable(reference(sessions, buyer, query))
        assert 42000 in set(rows["quantity"])


def _harmony_store(sessions) -> tuple[str, str, str]:
    """Feeds Alpha and Bravo at Santos, a buyer who sees both, and Bravo's name-only
    "Harmony Pacific" at Santos among fillers at two ports: (alpha, bravo, buyer) ids."""
    alpha, bravo, buyer = _two_feeds(sessions)
    upsert(sessions, bravo, pd.concat([
        _one_row("BRSSZ", "", "Harmony Pacific", "b1"),
        *(_one_row(port, "", f"Filler {i}", f"f{i}{port}") for i in range(6) for port in ("BRSSZ", "NLRTM")),
    ], ignore_index=True))
    return alpha, bravo, buyer


def test_issue_19_rule_5_an_ingest_that_gives_or_takes_a_names_imo_re_merges_its_rows(sessions):
    alpha, bravo, buyer = _harmony_store(sessions)
    lineups = Lineups(sessions)
    upsert(sessions, alpha, _one_row("BRSSZ", "9074729", "Ocean Grace", "a0"))
    assert len(lineups.frame(buyer, LineupQuery())) == 14

    def harmony() -> set[str]:
        rows = lineups.frame(buyer, LineupQuery())
        assert comparable(rows) == comparable(reference(sessions, buyer, LineupQuery()))
        at_santos = (rows["port_unlocode"].astype(object) == "BRSSZ").to_numpy()
        mine = rows[at_santos & rows["vessel_name"].astype(object).str.upper().str.contains("HARMONY").to_numpy()]
        return {str(v) for v in mine["source_name"]} | {f"IMO {v}" for v in mine["vessel_imo"].dropna()}

    assert harmony() == {"Bravo Port Data"}
    steps = (
        # The IMO arrives at another port: Bravo's Santos row is merged as that IMO
        # (and still alone at Santos); then Alpha reports the Santos call: one row.
        (_one_row("NLRTM", "9345934", "HARMONY PACIFIC", "a1"), {"Bravo Port Data"}),
        (_one_row("BRSSZ", "9345934", "MV HARMONY PACIFIC", "a2"), {"Alpha Lineups;Bravo Port Data", "IMO 9345934"}),
        # Alpha corrects a2's IMO: the name now has two IMO numbers and stays a name.
        (_one_row("BRSSZ", "9348247", "MV HARMONY PACIFIC", "a2"), {"Alpha Lineups", "Bravo Port Data", "IMO 9348247"}),
        # Alpha renames a1: one IMO again (9348247), so Bravo's record joins a2.
        (_one_row("NLRTM", "9345934", "HARMONY PACIFIC II", "a1"), {"Alpha Lineups;Bravo Port Data", "IMO 9348247"}),
    )
    for rows, expected in steps:
        report = upsert(sessions, alpha, rows)
        assert report.views["incremental"] == 1 and report.views["full"] == 0, report.views
        assert harmony() == expected


def test_issue_19_rule_5_a_commodity_given_or_blanked_on_an_imo_record_re_merges_the_names_rows(sessions):
    """Only served records teach an IMO (C1: a blank commodity is never served), so a
    revision that gives an IMO record its commodity, or blanks it, makes or breaks the
    name's link without changing the IMO or the name; so does a new served record of
    an IMO and name that only an unserved record of the feed carried before."""
    alpha, bravo, buyer = _harmony_store(sessions)
    lineups = Lineups(sessions)
    upsert(sessions, alpha, _one_row("NLRTM", "9345934", "HARMONY PACIFIC", "a1", commodity=""))

    def santos_key() -> str:
        rows = lineups.frame(buyer, LineupQuery())
        assert comparable(rows) == comparable(reference(sessions, buyer, LineupQuery()))
        at_santos = (rows["port_unlocode"].astype(object) == "BRSSZ").to_numpy()
        harmony = rows["vessel_name"].astype(object).str.upper().str.contains("HARMONY").to_numpy()
        (key,) = rows[at_santos & harmony]["vessel_key"].astype(object)
        return key

    assert santos_key() == "NAME:HARMONY PACIFIC"  # a1 is not served: it teaches nothing
    for rows, expected in (
        (_one_row("NLRTM", "9345934", "HARMONY PACIFIC", "a1"), "IMO9345934"),  # a1 served now
        (_one_row("NLRTM", "9345934", "HARMONY PACIFIC", "a1", commodity=""), "NAME:HARMONY PACIFIC"),  # and not
        (_one_row("NLRTM", "9345934", "HARMONY PACIFIC", "a2"), "IMO9345934"),  # a new served record
    ):
        report = upsert(sessions, alpha, rows)
        assert report.views["full"] == 0, report.views
        assert santos_key() == expected


def test_a_view_is_built_once_when_many_readers_ask_at_once(sessions, monkeypatch):
    with transaction(sessions) as session:
        payload = demo.load_demo(session, 600, 7, dt.date(2024, 3, 1))
        feed_ids = [f.id for f in accounts.entitled_feeds(session, payload["buyer_id"])]
    merged = []
    original = merges.Merges.rows
    monkeypatch.setattr(merges.Merges, "rows", lambda self, view: (merged.append(view.id), original(self, view))[1])
    key = upkeep.ViewKey.of("all", feed_ids)
    results, errors = [], []

    def ask():
        try:
            results.append(builds.ensure(sessions, key))
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == [] and len(results) == 4 and len(set(results)) == 1
    assert merged == [results[0]]


def test_a_view_whose_builder_was_killed_is_built_by_the_next_reader_at_once(sessions, store_settings):
    """A reader waits for a build in another process, and gives up after its wait;
    once that process is killed in the middle of its build (a worker killed under
    load), the next reader builds the view at once: the build's hold on a view dies
    with the process (its database transaction), not after a timeout."""
    with transaction(sessions) as session:
        payload = demo.load_demo(session, 300, 7, dt.date(2024, 3, 1))
        feed_ids = [f.id for f in accounts.entitled_feeds(session, payload["buyer_id"])]
    key = upkeep.ViewKey.of("all", feed_ids)
    with paused_build(store_settings, key) as builder:
        began = time.monotonic()
        with pytest.raises(builds.ViewBusy):
            builds.ensure(sessions, key, wait=0.5)
        assert time.monotonic() - began < 5  # the wait is the reader's, not a lock's
        builder.kill()
        builder.wait(10)
    began = time.monotonic()
    view_id = builds.ensure(sessions, key, wait=10)
    assert time.monotonic() - began < 10
    with transaction(sessions) as session:
        view = session.get(MergedView, view_id)
        assert view.state == "ready" and view.row_count > 0
        assert session.scalar(select(func.count()).select_from(MergedRow).where(MergedRow.view_id == view_id)) == view.row_count


def test_a_reader_that_may_not_wait_is_told_at_once_that_a_build_elsewhere_holds_what_it_needs(sessions, store_settings):
    """A server's reader (`wait=0`) never waits in its thread for a build in another
    process: of the view being built, and on SQLite of any missing view, whose row it
    cannot add while the build holds the one write lock (`builds.ViewBusy`, asked
    again by the server off its threads). On PostgreSQL the other view is built at once."""
    with transaction(sessions) as session:
        payload = demo.load_demo(session, 300, 7, dt.date(2024, 3, 1))
        feed_ids = sorted(f.id for f in accounts.entitled_feeds(session, payload["buyer_id"]))
    held, other = upkeep.ViewKey.of("all", feed_ids), upkeep.ViewKey.of("all", feed_ids[:1])
    with paused_build(store_settings, held):
        began = time.monotonic()
        with pytest.raises(builds.ViewBusy):
            builds.ensure(sessions, held, wait=0)
        if store_settings.db_url.startswith("sqlite"):
            with pytest.raises(builds.ViewBusy):
                builds.ensure(sessions, other, wait=0)
            with transaction(sessions) as session:  # nothing half-added
                assert session.scalar(select(func.count()).select_from(MergedView).where(MergedView.feed_set == other.feed_set)) == 0
        else:
            with transaction(sessions) as session:
                assert session.get(MergedView, builds.ensure(sessions, other, wait=0)).state == "ready"
        assert time.monotonic() - began < 10  # SQLite's busy timeout, which it no longer waits for, is 30 s


def test_a_server_reader_asks_again_while_the_view_is_busy_and_gives_up_after_its_wait():
    """`patiently`: a read told ViewBusy is asked again after pauses until it answers,
    and after its wait the last ViewBusy is raised (the API's 500, as before)."""
    key = upkeep.ViewKey.of("all", ["a"])
    asked: list[float] = []

    def busy_for(times: int):
        async def ask():
            asked.append(time.monotonic())
            if len(asked) <= times:
                raise builds.ViewBusy(key)
            return "rows"
        return ask

    assert asyncio.run(patiently(busy_for(3), wait=30)) == "rows" and len(asked) == 4
    assert asked[-1] - asked[0] >= sum(PAUSES_S[:3])  # paused between asks, on the loop
    asked.clear()
    with pytest.raises(builds.ViewBusy):
        asyncio.run(patiently(busy_for(10**6), wait=0.4))
    assert asked[-1] - asked[0] <= 0.4 and len(asked) >= 3


def _six_vessels(seed: int) -> tuple[np.random.Generator, list[tuple[str, str]]]:
    """A generator seeded `seed` and six vessels (IMO number, name) drawn from it."""
    rng = np.random.default_rng(seed)
    return rng, list(zip(demo.imo_numbers(rng, 6), [f"VESSEL {i}" for i in range(6)]))


def _counted_records(session) -> float | None:
    """The records that the planner's statistics count (None: none yet)."""
    from sqlalchemy import exc, text

    if session.get_bind().dialect.name == "postgresql":
        known = session.scalar(text("SELECT reltuples FROM pg_class WHERE oid = to_regclass('records')"))
        return known if known >= 0 else None
    try:
        stat = session.scalar(text("SELECT stat FROM sqlite_stat1 WHERE tbl = 'records' LIMIT 1"))
    except exc.OperationalError:
        return None
    return float(stat.split()[0]) if stat else None


def test_the_planner_counts_a_load_of_a_tenth_of_the_records_or_more(sessions):
    """Both planners choose by statistics, and nothing else takes them (PostgreSQL's
    autovacuum may be off or behind; SQLite has none). Without them a 1,000,000-record
    daily update took 6.8 s on PostgreSQL instead of 4.2-4.9 s (a feed taken for 250
    records: its lookups scanned every record), and SQLite read a list of 600 names
    through the (feed, ref) key (0.9 s instead of 27 ms). A load of at least a tenth
    of the records is counted in its transaction; a smaller one is not."""
    rng, vessels = _six_vessels(5)
    alpha, bravo, _ = _two_feeds(sessions)
    with transaction(sessions) as session:
        assert not _counted_records(session)  # none, or the empty table that migration 0013 analysed
    upsert(sessions, alpha, feed_file(rng, [f"a{i}" for i in range(200)], vessels))
    with transaction(sessions) as session:
        assert _counted_records(session) == 200  # counted: the first load of the table
    upsert(sessions, alpha, feed_file(rng, [f"b{i}" for i in range(15)], vessels))
    with transaction(sessions) as session:
        assert _counted_records(session) == 200  # 15 rows, under a tenth: not counted again
    upsert(sessions, bravo, feed_file(rng, [f"c{i}" for i in range(30)], vessels))
    with transaction(sessions) as session:
        assert _counted_records(session) == 245


def _vacuums(engine, table: str) -> int:
    """How many times PostgreSQL has vacuumed `table` (not autovacuum)."""
    from sqlalchemy import text

    with engine.connect() as connection:
        return connection.scalar(text(
            "SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = to_regclass(:table)"
        ), {"table": table})


def test_on_postgresql_a_load_of_a_tenth_of_the_records_or_more_is_vacuumed_once_committed(sessions, engine):
    """A vacuum marks the records' pages all-visible, so that the views' lookups read
    their covering indexes alone: a daily update's read of the identities of ~600
    names at 1,000,000 records took 0.71 s through the table, 0.18 s from the index
    alone. Nothing else vacuums on a server whose autovacuum is off (this machine's),
    and autovacuum comes a minute or more later, for inserts past a fifth of the
    table. A load of a tenth of the records or more is vacuumed once it has committed."""
    if engine.dialect.name != "postgresql":
        pytest.skip("SQLite has no visibility map: its indexes answer alone without a vacuum")

    rng, vessels = _six_vessels(5)
    alpha, bravo, _ = _two_feeds(sessions)
    assert _vacuums(engine, "records") == 0
    upsert(sessions, alpha, feed_file(rng, [f"a{i}" for i in range(200)], vessels))
    assert _vacuums(engine, "records") == 1
    upsert(sessions, bravo, feed_file(rng, [f"c{i}" for i in range(40)], vessels))
    assert _vacuums(engine, "records") == 2
    with pytest.raises(RuntimeError), transaction(sessions) as session:  # rolled back: nothing to vacuum
        upsert_in(session, bravo, feed_file(rng, [f"d{i}" for i in range(60)], vessels))
        raise RuntimeError("rolled back")
    assert _vacuums(engine, "records") == 2


def test_on_postgresql_views_rewritten_by_a_large_ingest_are_vacuumed_once_committed(sessions, engine):
    """A large ingest rewrites its feed's views and leaves their old rows dead, which
    the next updates wade through until a vacuum reclaims them (at 1,000,000 records
    a daily update took 2.13 s after a 100,000-record ingest, 1.46 s once
    `merged_rows` was vacuumed). Once such an ingest has committed, `merged_rows` is
    vacuumed; a small update, whose rows are a sliver of the table, is not held up by
    one."""
    from sqlalchemy import text

    if engine.dialect.name != "postgresql":
        pytest.skip("SQLite has no dead rows to reclaim: a deleted row's space is reused at once")
    alpha, bravo = _views_of_two_loaded_feeds(sessions, engine)
    rng, vessels = _six_vessels(11)
    with transaction(sessions) as session:
        buyer = session.scalar(select(Buyer.id).where(Buyer.name == "Sees both"))
    with engine.connect() as connection:  # a clean slate: the builds' rows vacuumed
        connection.execution_options(isolation_level="AUTOCOMMIT").execute(text("VACUUM ANALYZE merged_rows"))
    before = _vacuums(engine, "merged_rows")

    report = upsert(sessions, alpha, feed_file(rng, ["a1"], vessels))  # one record revised
    assert report.updated == 1 and report.views["incremental"] == 2
    assert _vacuums(engine, "merged_rows") == before

    report = upsert(sessions, alpha, feed_file(rng, [f"n{i}" for i in range(1_000)], vessels))
    assert report.inserted == 1_000
    assert _vacuums(engine, "merged_rows") == before + 1
    assert_views_match(sessions, Lineups(sessions), {"Sees both": buyer}, [alpha, bravo])  # nothing lost


def test_on_postgresql_a_large_load_is_not_held_up_by_another_transactions_analysis(sessions, engine):
    """A large ingest's ANALYZE of the records (`db.analyze_if_stale`) waits at most
    a moment for another transaction's, which holds its lock to its commit (a large
    ingest of another feed, whose upkeep may take minutes), and then goes on without
    it: the ingest commits its records and views, nothing lost."""
    if engine.dialect.name != "postgresql":
        pytest.skip("SQLite takes one write at a time: no other transaction analyses meanwhile")
    from sqlalchemy import text

    rng, vessels = _six_vessels(7)
    alpha, bravo, buyer = _two_feeds(sessions)
    upsert(sessions, alpha, feed_file(rng, [f"a{i}" for i in range(50)], vessels))
    builds.ensure_buyer(sessions, buyer)
    with engine.connect() as holder:
        holder.execute(text("ANALYZE records"))  # its lock held until the rollback below
        report = upsert(sessions, bravo, feed_file(rng, [f"c{i}" for i in range(100)], vessels))  # failed at 30 s before
        holder.rollback()
    assert report.inserted == 100
    with transaction(sessions) as session:
        assert _counted_records(session) == 50  # not counted again: the other ANALYZE held the table
    rows = Lineups(sessions).frame(buyer, LineupQuery())
    assert comparable(rows) == comparable(reference(sessions, buyer, LineupQuery()))


def _views_of_two_loaded_feeds(sessions, engine) -> tuple[str, str]:
    """On PostgreSQL: Alpha (200 records) and Bravo (30), a buyer of both and their
    views built; the two feeds' ids. Skips on SQLite, whose statistics are averages
    per index, not counts per value."""
    if engine.dialect.name != "postgresql":
        pytest.skip("SQLite's statistics are averages per index, not counts per value")
    rng, vessels = _six_vessels(5)
    alpha, bravo, buyer = _two_feeds(sessions)
    upsert(sessions, alpha, feed_file(rng, [f"a{i}" for i in range(200)], vessels))
    upsert(sessions, bravo, feed_file(rng, [f"c{i}" for i in range(30)], vessels))
    builds.ensure_buyer(sessions, buyer)
    return alpha, bravo


def _buyer_of(sessions, name: str, feed_id: str) -> str:
    with transaction(sessions) as session:
        buyer = accounts.add_buyer(session, name)
        accounts.set_subscription(session, buyer, session.get(Feed, feed_id), "active")
        return buyer.id


def _views_counted(sessions) -> tuple[set[int], set[int]]:
    """(the views, the views that PostgreSQL's statistics of `merged_rows.view_id` count)."""
    from sqlalchemy import text

    with transaction(sessions) as session:
        views = set(session.scalars(select(MergedView.id)))
        counted = session.scalar(text(
            "SELECT most_common_vals::text FROM pg_stats"
            " WHERE schemaname = current_schema() AND tablename = 'merged_rows' AND attname = 'view_id'"
        ))
    return views, {int(v) for v in counted.strip("{}").split(",")}


def test_on_postgresql_the_planner_counts_every_new_view_once_it_has_committed(sessions, engine):
    """PostgreSQL's statistics of `merged_rows` that do not count a view put it at one
    row: a 1,000,000-record daily update read that view's stored rows through a hash
    of the whole view and updated each row by a walk of its index (1.0 s, and 0.15 s
    an update). A new view's `view_id` is counted once it has committed."""
    alpha, _ = _views_of_two_loaded_feeds(sessions, engine)
    views, counted = _views_counted(sessions)
    assert len(views) == 2 and counted == views
    builds.ensure_buyer(sessions, _buyer_of(sessions, "Sees Alpha", alpha))  # a new feed set
    views, counted = _views_counted(sessions)
    assert len(views) == 3 and counted == views


def test_on_postgresql_a_new_view_is_served_while_another_transaction_analyses_the_views(sessions, engine):
    """The count of a new view (`builds._count_views`) must not hold up the reader who
    built it: while another transaction holds ANALYZE's lock on `merged_rows` (an
    ingest that analysed the table after writing a large view holds it to its
    commit), the view is served without its count, which the next new view's takes."""
    from sqlalchemy import text

    alpha, bravo = _views_of_two_loaded_feeds(sessions, engine)
    sees_alpha, sees_bravo = _buyer_of(sessions, "Sees Alpha", alpha), _buyer_of(sessions, "Sees Bravo", bravo)
    with engine.connect() as holder:
        holder.execute(text("ANALYZE merged_rows"))  # its lock held until the rollback below
        builds.ensure_buyer(sessions, sees_alpha)  # waited 30 s, then failed, before
        rows = Lineups(sessions).frame(sees_alpha, LineupQuery())
        assert comparable(rows) == comparable(reference(sessions, sees_alpha, LineupQuery()))
        holder.rollback()
    builds.ensure_buyer(sessions, sees_bravo)
    views, counted = _views_counted(sessions)
    assert len(views) == 4 and counted == views


def test_on_postgresql_a_view_built_whole_is_not_held_up_by_another_transactions_analysis(sessions, engine):
    """A view written whole takes the planner's statistics of `merged_rows` in its
    build (`upkeep._analyze`) by the rule of every large write (`db.analyze_if_stale`):
    while another transaction holds ANALYZE's lock on the table (an ingest that
    analysed it after writing a large view holds it to its commit), the build goes on
    without them and the buyer is served. Before, it waited for that lock until the
    statement timeout and failed, its view built and rolled back."""
    from sqlalchemy import text

    if engine.dialect.name != "postgresql":
        pytest.skip("SQLite takes one write at a time: no other transaction analyses meanwhile")
    rng, vessels = _six_vessels(5)
    alpha, _, buyer = _two_feeds(sessions)
    upsert(sessions, alpha, feed_file(rng, [f"a{i}" for i in range(200)], vessels))
    with engine.connect() as holder:
        holder.execute(text("ANALYZE merged_rows"))  # its lock held until the rollback below
        builds.ensure_buyer(sessions, buyer)  # the store's first views: written whole
        rows = Lineups(sessions).frame(buyer, LineupQuery())
        assert len(rows) and comparable(rows) == comparable(reference(sessions, buyer, LineupQuery()))
        holder.rollback()


def read_by(sessions, buyer_id: str) -> None:
    """The buyer reads a page of each merge mode as a server reads it, its reads of
    views noted (`UsageWriter.view_read`, issue 47) and written."""
    usage = UsageWriter(sessions.kw["bind"])
    reader = Lineups(sessions, noted=usage.view_read)
    for merge_mode in ("all", "by_source"):
        reader.page(buyer_id, dataclasses.replace(LineupQuery(), merge=merge_mode))
    assert usage.flush()
    usage.close()


def test_views_no_buyer_can_read_are_dropped_after_the_retention(sessions):
    with transaction(sessions) as session:
        payload = demo.load_demo(session, 300, 7, dt.date(2024, 3, 1))
    builds.ensure_buyer(sessions, payload["buyer_id"])
    read_by(sessions, payload["buyer_id"])  # issue 47: the retention is for views buyers read
    with transaction(sessions) as session:
        assert builds.prune(session, dt.timedelta(0)) == 0  # all in use
        accounts.set_buyer_status(session, session.get(Buyer, payload["buyer_id"]), "suspended")
    with transaction(sessions) as session:
        assert builds.prune(session, dt.timedelta(days=1)) == 0  # marked unused, kept for now
        assert all(v.unused_since is not None for v in session.scalars(select(MergedView)))
        session.execute(update(MergedView).values(unused_since=dt.datetime(2020, 1, 1)))
    with transaction(sessions) as session:
        dropped = builds.prune(session, dt.timedelta(days=1))
        assert dropped > 0 and session.scalar(select(func.count()).select_from(MergedView)) == 0
        assert session.scalar(select(func.count()).select_from(MergedRow)) == 0


def test_ingests_leave_views_no_buyer_can_read_and_a_buyer_back_on_them_reads_them_up_to_date(sessions, caplog):
    """A view that no buyer can read any longer is kept for the retention period, in
    case its buyer comes back, without the upkeep of every ingest meanwhile: the
    buyer who returns to the feed set gets it brought up to date from the change log
    (merged again in part, not afresh) before the change commits."""
    feed_ids, buyer = _buyer_short_of_one_feed(sessions, "Comes back")
    read_by(sessions, buyer)  # issue 47: the retention is for views buyers read
    old_key = upkeep.ViewKey.of("all", feed_ids[:-1])
    with transaction(sessions) as session:  # gains the last feed: their old set is read by no one
        accounts.set_subscription(session, session.get(Buyer, buyer), session.get(Feed, feed_ids[-1]), "active")
    builds.ensure_buyer(sessions, buyer)
    with transaction(sessions) as session:
        builds.prune(session)
        old = session.scalar(select(MergedView).where(MergedView.feed_set == old_key.feed_set))
        assert old.unused_since is not None
        old_id, old_versions = old.id, dict(old.versions)
    rng = np.random.default_rng(3)
    with transaction(sessions) as session:
        imo, name = session.execute(select(Record.vessel_imo, Record.vessel_name).where(
            Record.feed_id == feed_ids[0], Record.vessel_imo.is_not(None))).first()
    report = upsert(sessions, feed_ids[0], feed_file(rng, ["late-1", "late-2"], [(imo, name)]))
    assert report.inserted == 2
    with transaction(sessions) as session:  # left behind by the ingest
        assert session.get(MergedView, old_id).versions == old_versions
    with transaction(sessions) as session:  # back on the old set
        accounts.set_subscription(session, session.get(Buyer, buyer), session.get(Feed, feed_ids[-1]), "cancelled")
    with caplog.at_level("INFO", logger="lineups.views"):
        builds.ensure_buyer(sessions, buyer)
    assert f"View {old_id} (all) brought up to date (incremental)" in caplog.text
    with transaction(sessions) as session:
        builds.prune(session)
        view = session.get(MergedView, old_id)  # the same view, caught up
        assert view.unused_since is None and view.versions[feed_ids[0]] > old_versions[feed_ids[0]]
    query = LineupQuery()
    assert comparable(Lineups(sessions).frame(buyer, query)) == comparable(reference(sessions, buyer, query))


def test_reads_of_current_views_build_nothing(sessions, monkeypatch):
    with transaction(sessions) as session:
        payload = demo.load_demo(session, 300, 7, dt.date(2024, 3, 1))
    builds.ensure_buyer(sessions, payload["buyer_id"])
    monkeypatch.setattr(builds, "ensure", lambda *a, **k: pytest.fail("a current view was built again"))
    lineups = Lineups(sessions)
    for params in ({}, {"merge": "by_source"}, {"latest": "true", "port": "BRSSZ"}):
        query = parse_query({k: [v] for k, v in params.items()}, default_taxonomy().parse_filter)[0]
        page = lineups.page(payload["buyer_id"], query, None, 10)
        assert len(page.rows) == 10 and page.next is not None


def test_the_explorers_pages_neighbours_and_totals_agree_with_the_whole_result(sessions):
    """What the explorer reads instead of the whole result (issue 17 at scale): a page
    at any offset in any order, the rows near a page, and the charts' totals, all in
    SQL, equal what the whole result gives in pandas, on both back ends."""
    from pipeline_reference import sorted_rows

    from store.views.sql import ORDERABLE

    with transaction(sessions) as session:
        payload = demo.load_demo(session, 400, 7, dt.date(2024, 3, 1))
    buyer = payload["buyer_id"]
    lineups = Lineups(sessions)
    taxonomy = default_taxonomy()
    for params in ({}, {"latest": "true", "commodity": "Dry Bulk"}, {"merge": "by_source", "commodity": "Dry Bulk"}):
        query = parse_query({k: [v] for k, v in params.items()}, taxonomy.parse_filter)[0]
        whole = lineups.frame(buyer, query)
        assert len(whole) > 40, params
        # Pages in C3 order and in every order the table offers, both ways, at two offsets.
        assert list(lineups.rows_at(buyer, query, 30, 20)["id"]) == list(whole["id"].iloc[30:50])
        for column in ORDERABLE:
            for ascending in (True, False):
                expected = sorted_rows(whole, column, ascending)
                for offset in (0, 25):
                    got = lineups.rows_at(buyer, query, offset, 25, (column, ascending))
                    assert list(got["id"]) == list(expected["id"].iloc[offset : offset + 25]), (params, column, ascending)
        # The rows near a page: at its ports, dated within the spans.
        dated = whole[whole["combined_date"].notna()]
        ns = pd.DatetimeIndex(dated["combined_date"]).asi8
        middle = int(np.median(ns))
        spans = [(middle - 3 * 86_400 * 10**9, middle + 3 * 86_400 * 10**9)]
        ports = sorted(set(dated["port_unlocode"].astype(str)))[:2]
        inside = dated[(ns >= spans[0][0]) & (ns <= spans[0][1]) & dated["port_unlocode"].astype(str).isin(ports).to_numpy()]
        assert list(lineups.near(buyer, query, ports, spans)["id"]) == list(inside["id"]), params
        # The charts' totals.
        totals = lineups.summary(buyer, query)
        tonnes = dated[(dated["quantity_unit"] == "MT").to_numpy() & dated["quantity"].notna().to_numpy()]
        days = pd.DatetimeIndex(tonnes["combined_date"]).asi8 // (86_400 * 10**9)
        by_day = tonnes.assign(day=days, group=tonnes["commodity_normalized_group"].astype(object).fillna("-"))
        expected_tonnes = by_day.groupby(["day", "group"])["quantity"].sum().to_dict()
        got_tonnes = {(int(d), "-" if pd.isna(g) else g): float(t) for d, g, t in totals.tonnes.itertuples(index=False)}
        assert got_tonnes == pytest.approx(expected_tonnes), params
        others = whole[whole["quantity"].notna().to_numpy() & (whole["quantity_unit"] != "MT").to_numpy()]
        assert totals.units == {
            (None if pd.isna(u) else u): n for u, n in others["quantity_unit"].value_counts(dropna=False).items()
        }, params
        vessels = whole.assign(status=whole["vessel_status"].astype(object).fillna("-"))
        expected_vessels = vessels.groupby(["port_unlocode", "status"])["vessel_key"].nunique().to_dict()
        got_vessels: dict = {}
        for port, _, status, n in totals.statuses.itertuples(index=False):
            key = (port, "-" if pd.isna(status) else status)
            got_vessels[key] = got_vessels.get(key, 0) + int(n)
        assert got_vessels == expected_vessels, params


def test_latest_from_counts_a_call_that_began_before_from_beneath_a_later_shorter_one(sessions):
    """C3: `latest` keeps, per (vessel, port), the top row among the rows that pass the
    filters. With `from` alone the count reads the view's (top) rows dated on or after
    `from`, plus the rows (pairs) that began before `from` and reach past it
    (`sql._from_count`): here the pair's top row (the later, shorter call) ends
    before `from`, so only the long call beneath it keeps the vessel in the result."""
    with transaction(sessions) as session:
        feed_id = feeds.add_feed(session, "Alpha Lineups", ["BRSSZ", "NLRTM"]).id
        buyer_id = accounts.add_buyer(session, "Buyer").id
        accounts.set_subscription(session, session.get(Buyer, buyer_id), session.get(Feed, feed_id), "active")
    calls = [  # (ref, port, name, commodity, eta, etd)
        ("long", "BRSSZ", "Ocean Grace", "wheat", "2024-03-01T06:00:00Z", "2024-03-30T06:00:00Z"),
        ("short", "BRSSZ", "Ocean Grace", "Soybeans", "2024-03-10T06:00:00Z", "2024-03-12T06:00:00Z"),
        ("after", "BRSSZ", "Harmony Pacific", "wheat", "2024-03-20T06:00:00Z", ""),
        ("before", "NLRTM", "Nordic Star", "wheat", "2024-03-05T06:00:00Z", "2024-03-06T06:00:00Z"),
        ("undated", "NLRTM", "Sea Breeze", "wheat", "", ""),
    ]
    upsert(sessions, feed_id, pd.DataFrame([
        {"ref": ref, "port_unlocode": port, "vessel_imo": "", "vessel_name": name, "commodity": commodity,
         "eta": eta, "etd": etd, "quantity": "1000"} for ref, port, name, commodity, eta, etd in calls
    ], dtype=object))
    lineups = Lineups(sessions)
    for mode in ("all", "by_source"):
        query = LineupQuery(latest=True, date_from=dt.date(2024, 3, 15), merge=mode)
        expected = reference(sessions, buyer_id, query)
        assert sorted(expected["vessel_name"]) == ["Harmony Pacific", "Ocean Grace"]
        assert set(expected["commodity_normalized"]) == {"Wheat"}  # Ocean Grace's long call, not its top row
        assert comparable(lineups.frame(buyer_id, query)) == comparable(expected)
        assert lineups.count(buyer_id, query) == 2
        every_call = dataclasses.replace(query, latest=False)  # the long call, and the call after `from`
        assert lineups.count(buyer_id, every_call) == len(reference(sessions, buyer_id, every_call)) == 2
        everything = dataclasses.replace(query, date_from=dt.date(2024, 3, 1))
        assert lineups.count(buyer_id, everything) == len(reference(sessions, buyer_id, everything)) == 3


def test_a_buyer_who_gains_or_loses_a_feed_gets_views_copied_from_their_old_ones(sessions, caplog, monkeypatch):
    """A subscription change makes a new feed set: its `all` view starts as a copy of
    the nearest current view's rows, and only the pairs (and IMO links) of the feeds
    added or removed are merged again (`upkeep._nearest`, `upkeep._copy`); the
    `by_source` view, which holds every feed's rows, is not touched at all. The result
    equals the merge of the visible records, in both modes, both ways."""
    monkeypatch.setattr(upkeep, "INCREMENTAL_SHARE", 0.6)  # a small store: one feed is a large share of it
    feed_ids, buyer = _buyer_short_of_one_feed(sessions, "Changes feeds")
    lineups = Lineups(sessions)
    for status, name in (("active", "gains"), ("cancelled", "loses")):
        with transaction(sessions) as session:
            accounts.set_subscription(session, session.get(Buyer, buyer), session.get(Feed, feed_ids[-1 if name == "gains" else 0]), status)
        caplog.clear()
        with caplog.at_level("INFO", logger="lineups.views"):
            assert builds.ensure_buyer(sessions, buyer) == 2
        copied = [r.getMessage() for r in caplog.records if "starts as a copy of view" in r.getMessage()]
        said = "(all) starts as a copy of view 1: +1 feeds, 0 removed" if name == "gains" else "+0 feeds, 1 removed"
        assert len(copied) == 1 and said in copied[0], copied
        assert not [r for r in caplog.records if "(by_source) brought up to date" in r.getMessage()]
        for params in QUERIES:
            query = parse_query({k: [v] for k, v in params.items()}, default_taxonomy().parse_filter)[0]
            expected = reference(sessions, buyer, query)
            assert comparable(lineups.frame(buyer, query)) == comparable(expected), (name, params)
            assert lineups.count(buyer, query) == len(expected), (name, params)


def test_by_source_rows_are_kept_once_per_feed_whatever_buyers_read_them(sessions):
    """One `by_source` view holds every feed's own merge once (C2.6): buyers on
    different feed sets add no rows, and each reads only their own feeds' rows, with
    C3's `latest` among their feeds' rows, not among every feed's."""
    feed_ids, buyer = _buyer_short_of_one_feed(sessions, "All but the last")
    with transaction(sessions) as session:
        other = accounts.add_buyer(session, "The last two").id
        for feed_id in feed_ids[-2:]:
            accounts.set_subscription(session, session.get(Buyer, other), session.get(Feed, feed_id), "active")
        views = session.execute(select(MergedView.id, MergedView.feeds).where(MergedView.mode == "by_source")).all()
        every = sorted(session.scalars(select(Feed.id)))  # the buyer's, the last one, and those no buyer reads
        own = sum(len(merge.merge(load_records(session, [feed_id]), "by_source")) for feed_id in every)
    assert set(feed_ids) < set(every) and len(views) == 1 and sorted(views[0].feeds) == every
    assert builds.ensure_buyer(sessions, other) == 2
    with transaction(sessions) as session:
        assert session.execute(select(MergedView.id).where(MergedView.mode == "by_source")).all() == [(views[0].id,)]
        assert session.scalar(select(func.count()).select_from(MergedRow).where(MergedRow.view_id == views[0].id)) == own
    lineups = Lineups(sessions)
    for buyer_id in (buyer, other):
        for params in ({"merge": "by_source"}, {"merge": "by_source", "latest": "true"}, {"merge": "by_source", "latest": "true", "country": "Brazil"}):
            query = parse_query({k: [v] for k, v in params.items()}, default_taxonomy().parse_filter)[0]
            expected = reference(sessions, buyer_id, query)
            assert len(expected) and comparable(lineups.frame(buyer_id, query)) == comparable(expected), params
            assert lineups.count(buyer_id, query) == len(expected), params


def test_a_new_feed_set_whose_change_passes_one_statements_parameter_limit_is_built(sessions, engine, monkeypatch, caplog):
    """A buyer gains a feed whose records touch more (vessel, port) pairs than one
    statement may carry as parameters: the new views are still derived from the old
    ones, their records read a chunk of pairs per statement, and they equal the merge
    of the visible records. (At 1,000,000 records the chunks of a large change were
    OR-ed into one statement and SQLite refused it: "too many SQL variables".) Here the
    chunks are made small, and on SQLite the limit with them, so that a small store
    has such a change."""
    import sqlite3

    from sqlalchemy import event

    from store.views import records
    from store.views import stored

    monkeypatch.setattr(upkeep, "INCREMENTAL_SHARE", 0.6)
    for module, name in ((stored, "_PAIRS_CHUNK"), (records, "_IN_LIST")):
        monkeypatch.setattr(module, name, 8)
    feed_ids, buyer = _buyer_short_of_one_feed(sessions, "Gains a feed")
    with transaction(sessions) as session:
        gained = session.scalar(select(func.count(Record.id)).where(Record.feed_id == feed_ids[-1]))
    sqlite = engine.dialect.name == "sqlite"

    def limit(connection, _record):  # at most 100 parameters a statement
        connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 100)

    if sqlite:  # on every connection from now on
        event.listen(engine, "connect", limit)
        engine.dispose()
    try:
        with transaction(sessions) as session:
            accounts.set_subscription(session, session.get(Buyer, buyer), session.get(Feed, feed_ids[-1]), "active")
        assert gained > 100  # pairs for many statements of 8 pairs, and past 100 parameters in one
        with caplog.at_level("INFO", logger="lineups.views"):
            assert builds.ensure_buyer(sessions, buyer) == 2
        copied = [r.getMessage() for r in caplog.records if "starts as a copy of view" in r.getMessage()]
        assert len(copied) == 1 and "(all) starts as a copy of view 1: +1 feeds, 0 removed" in copied[0], copied
    finally:
        if sqlite:  # reads may pass 100 parameters (a group's leaves, the buyer's feeds)
            event.remove(engine, "connect", limit)
            engine.dispose()
    lineups = Lineups(sessions)
    for params in QUERIES:
        query = parse_query({k: [v] for k, v in params.items()}, default_taxonomy().parse_filter)[0]
        expected = reference(sessions, buyer, query)
        assert comparable(lineups.frame(buyer, query)) == comparable(expected), params


def _buyer_short_of_one_feed(sessions, name: str) -> tuple[list[str], str]:
    """A demo store of 800 records and a buyer `name` subscribed to every feed but the
    last, with their views built: (the feed ids, the buyer's id)."""
    with transaction(sessions) as session:
        payload = demo.load_demo(session, 800, 7, dt.date(2024, 3, 1))
        feed_ids = [f.id for f in accounts.entitled_feeds(session, payload["buyer_id"])]
        buyer = accounts.add_buyer(session, name).id
        for feed_id in feed_ids[:-1]:
            accounts.set_subscription(session, session.get(Buyer, buyer), session.get(Feed, feed_id), "active")
    builds.ensure_buyer(sessions, buyer)
    return feed_ids, buyer
