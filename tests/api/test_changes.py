"""The change feed (issue 46, `GET /v1/lineups/changes`): a client that starts without
a cursor and applies every item of every page in order (upsert by id, delete by id)
holds exactly what `/v1/lineups` returns for the same filters, after any sequence of
ingests, revisions, new records, commodity mappings, subscription changes (cancelled,
trial, active), a buyer suspended and resumed, views dropped and made again, and server
restarts between its calls; a cursor that cannot be served exactly is refused with
`cursor_expired`, and the client starts again. On SQLite and PostgreSQL; several
server processes in tests/production/test_change_feed_processes.py."""

from __future__ import annotations

import datetime as dt
import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from sqlalchemy import func, select

from store.access import accounts
from store.database.db import transaction
from store.database.schema import Buyer, Feed, MergedView, ViewChange
from store.intake import demo, feeds, ingest, validate
from store.intake import commodities
from store.views import builds
from tests.api.conftest import assert_error

PORTS = ("NLRTM", "BEANR", "BRSSZ")
#: Raw commodities; the last two resolve only once an operator maps them (C6).
COMMODITIES = ("Soybeans", "wheat", "steam coal", "Iron ore fines", "mystery cargo", "odd grain")
MAPPINGS = (("mystery cargo", "Soybeans"), ("odd grain", "Wheat"))
SHIPPERS = ("", "Acme Trading", "Beta Grains")
#: The filter sets every sync is checked with: both merge modes, `latest`, content filters.
FILTERS = (
    {},
    {"latest": "true"},
    {"merge": "by_source"},
    {"merge": "by_source", "latest": "true"},
    {"port": "NLRTM", "latest": "true"},
    {"commodity": "Dry Bulk", "latest": "true", "from": "2024-03-12"},
    {"country": "Belgium", "merge": "by_source"},
)
#: Small pages, so that snapshots, ids gone and pairs all span several pages.
PAGE = 3
_NAMES = itertools.count()


def records(rng: np.random.Generator, refs: list[str], vessels: list[tuple[str, str]]) -> pd.DataFrame:
    """Feed-file rows (text, as read from a CSV) for `refs`: random ports, vessels
    (30% without their IMO number), commodities, dates and counterparties."""
    rows = []
    for ref in refs:
        imo, name = vessels[rng.integers(len(vessels))]
        arrival = dt.datetime(2024, 3, 1) + dt.timedelta(days=int(rng.integers(1, 30)), hours=int(rng.integers(24)))
        rows.append({
            "ref": ref,
            "port_unlocode": PORTS[rng.integers(len(PORTS))],
            "vessel_imo": imo if rng.random() < 0.7 else "",
            "vessel_name": name,
            "commodity": COMMODITIES[rng.integers(len(COMMODITIES))],
            "quantity": str(int(rng.integers(1, 60)) * 1000),
            "eta": arrival.strftime("%Y-%m-%dT%H:%M:%SZ") if rng.random() < 0.9 else "",
            "etd": (arrival + dt.timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ") if rng.random() < 0.5 else "",
            "shipper": SHIPPERS[rng.integers(len(SHIPPERS))],
            "vessel_status": ("expected", "berthed")[rng.integers(2)],
        })
    return pd.DataFrame(rows, dtype=object)


class World:
    """Three feeds, a buyer with a key and a live server over the test's store; the
    changes an operator makes, as the store's own functions make them."""

    def __init__(self, sessions, make_api, fleet: int = 0):
        self.sessions, self.make_api = sessions, make_api
        tag = next(_NAMES)
        with transaction(sessions) as session:
            self.feed_ids = [feeds.add_feed(session, f"Feed {tag}-{i}", [port]).id for i, port in enumerate(PORTS)]
            buyer = accounts.add_buyer(session, f"Buyer {tag}")
            self.key, _ = accounts.create_key(session, buyer)
            self.buyer_id = buyer.id
            for feed_id in self.feed_ids[:2]:
                accounts.set_subscription(session, buyer, session.get(Feed, feed_id), "active")
        self.refs: dict[str, list[str]] = {feed_id: [] for feed_id in self.feed_ids}
        # Two vessels are named Harmony Pacific: name-only records resolve by name (issue 19).
        names = ["OCEAN GRACE", "MV Star Atlantic", "Harmony Pacific", "HARMONY PACIFIC", "Dawn Cape"]
        names += [f"Vessel {i}" for i in range(fleet)]
        self.vessels = list(zip(demo.imo_numbers(np.random.default_rng(len(names)), len(names)), names))
        self.made = itertools.count()
        self.api = make_api(self.key)
        self.active = True

    def ingest(self, feed: int, new: int, revised: int, seed: int) -> None:
        """`new` records and revisions of up to `revised` stored ones (C10 upsert)."""
        rng = np.random.default_rng(seed)
        feed_id = self.feed_ids[feed]
        known = self.refs[feed_id]
        old = list(rng.choice(known, size=min(revised, len(known)), replace=False)) if known else []
        fresh = [f"r{next(self.made)}" for _ in range(new)]
        known += fresh
        if not old + fresh:
            return
        rows = records(rng, old + fresh, self.vessels)
        with transaction(self.sessions) as session:
            clean = validate.validate_frame(rows.assign(_line=np.arange(2, len(rows) + 2)), name="feed.csv")
            ingest.upsert(session, session.get(Feed, feed_id), clean)

    def map_commodity(self, which: int) -> None:
        raw, leaf = MAPPINGS[which]
        with transaction(self.sessions) as session:
            commodities.map_commodity(session, raw, leaf)

    def subscribe(self, feed: int, status: str) -> None:
        with transaction(self.sessions) as session:
            buyer = session.get(Buyer, self.buyer_id)
            accounts.set_subscription(session, buyer, session.get(Feed, self.feed_ids[feed]), status)

    def suspend(self) -> None:
        with transaction(self.sessions) as session:
            accounts.set_buyer_status(session, session.get(Buyer, self.buyer_id), "suspended")
        self.active = False

    def resume(self) -> None:
        with transaction(self.sessions) as session:
            accounts.set_buyer_status(session, session.get(Buyer, self.buyer_id), "active")
        self.active = True

    def drop_unused_views(self) -> None:
        """Views no buyer can read are dropped (twice: marked, then dropped at once)."""
        for _ in range(2):
            with transaction(self.sessions) as session:
                builds.prune(session, retention=dt.timedelta(0))

    def restart(self) -> None:
        self.make_api.stop()
        self.api = self.make_api(self.key)


class Follower:
    """A client of the change feed for one filter set: its rows by id and its cursor."""

    def __init__(self, params: dict):
        self.params, self.rows, self.cursor, self.expired = params, {}, None, 0

    def sync(self, api) -> None:
        """Read pages until caught up, applying every item in order; start again on
        `cursor_expired`."""
        for _ in range(2_000):
            params = {**self.params, "limit": PAGE, **({"cursor": self.cursor} if self.cursor else {})}
            response = api.get("/v1/lineups/changes", params=params)
            if response.status_code == 400 and (response.json()["error"]["details"] or {}).get("reason") == "cursor_expired":
                assert_error(response, 400, "VALIDATION_ERROR", "cursor")
                self.rows, self.cursor = {}, None
                self.expired += 1
                continue
            assert response.status_code == 200, response.text
            body = response.json()
            for item in body["data"]:
                if item["op"] == "upsert":
                    self.rows[item["row"]["id"]] = item["row"]
                else:
                    assert item["op"] == "delete" and set(item) == {"op", "id"}, item
                    self.rows.pop(item["id"], None)
            assert body["next_cursor"] and body["nextCursor"] == body["next_cursor"]
            self.cursor = body["next_cursor"]
            if body["caught_up"]:
                return
        raise AssertionError("the change feed never caught up")


def download(api, params: dict) -> dict:
    """Every row of `/v1/lineups` for `params`, all pages, by id."""
    rows, cursor = {}, None
    while True:
        body = api.lineups(**params, limit=500, **({"cursor": cursor} if cursor else {}))
        rows.update((row["id"], row) for row in body["data"])
        cursor = body["next_cursor"]
        if cursor is None:
            return rows


def assert_in_sync(world: World, followers: list[Follower]) -> None:
    for follower in followers:
        follower.sync(world.api)
        expected = download(world.api, follower.params)
        assert follower.rows == expected, (follower.params, set(follower.rows) ^ set(expected))


STEPS = st.one_of(
    st.tuples(st.just("ingest"), st.integers(0, 2), st.integers(0, 8), st.integers(0, 6), st.integers(0, 2**16)),
    st.tuples(st.just("map"), st.integers(0, 1)),
    st.tuples(st.just("subscribe"), st.integers(0, 2), st.sampled_from(["active", "trial", "cancelled"])),
    st.tuples(st.just("suspend")),
    st.tuples(st.just("resume")),
    st.tuples(st.just("drop_views")),
    st.tuples(st.just("restart")),
    st.tuples(st.just("sync")),
)


def apply(world: World, step: tuple) -> None:
    kind, *args = step
    if kind == "ingest":
        world.ingest(*args)
    elif kind == "map":
        world.map_commodity(*args)
    elif kind == "subscribe":
        world.subscribe(*args)
    elif kind == "suspend":
        world.suspend()
    elif kind == "resume":
        world.resume()
    elif kind == "drop_views":
        world.drop_unused_views()
    elif kind == "restart":
        world.restart()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps=st.lists(STEPS, min_size=3, max_size=14))
def test_a_follower_of_the_change_feed_holds_what_lineups_returns_after_any_changes(sessions, make_api, steps):
    world = World(sessions, make_api)
    world.ingest(0, 8, 0, 1)
    world.ingest(1, 6, 0, 2)
    followers = [Follower(params) for params in FILTERS]
    assert_in_sync(world, followers)
    for step in steps:
        apply(world, step)
        if world.active and step[0] in ("sync", "restart", "ingest"):
            assert_in_sync(world, followers)
    if not world.active:
        response = world.api.get("/v1/lineups/changes", params={"cursor": followers[0].cursor})
        assert_error(response, 403, "FORBIDDEN")
        world.resume()
    assert_in_sync(world, followers)


def test_a_caught_up_follower_gets_only_what_an_ingest_changed(sessions, make_api):
    world = World(sessions, make_api, fleet=100)
    world.ingest(0, 200, 0, 1)
    follower = Follower({})
    follower.sync(world.api)
    before = dict(follower.rows)
    world.ingest(0, 0, 2, 7)  # two revisions
    response = world.api.get("/v1/lineups/changes", params={"cursor": follower.cursor, "limit": 500})
    assert response.status_code == 200, response.text
    body = response.json()
    after = download(world.api, {})
    changed = {i for i in set(before) | set(after) if before.get(i) != after.get(i)}
    ops = {item["row"]["id"] if item["op"] == "upsert" else item["id"] for item in body["data"]}
    assert changed <= ops and len(body["data"]) <= 3 * max(len(changed), 1) + 6, (changed, body["data"])
    assert body["caught_up"] is True
    # Nothing more: the same cursor again is an empty, caught-up page.
    again = world.api.get("/v1/lineups/changes", params={"cursor": body["next_cursor"]}).json()
    assert again["data"] == [] and again["caught_up"] is True


def test_a_view_written_whole_or_a_pruned_log_expires_the_cursor_and_never_serves_wrong_rows(sessions, make_api):
    world = World(sessions, make_api)
    world.ingest(0, 10, 0, 1)
    follower = Follower({})
    follower.sync(world.api)
    world.ingest(0, 3, 3, 5)
    with transaction(sessions) as session:  # the log no longer reaches the cursor (older than the retention)
        session.execute(ViewChange.__table__.delete())
    world.ingest(0, 3, 3, 6)
    response = world.api.get("/v1/lineups/changes", params={"cursor": follower.cursor})
    error = assert_error(response, 400, "VALIDATION_ERROR", "cursor")
    assert error["details"]["reason"] == "cursor_expired"
    follower.sync(world.api)
    assert follower.expired == 1 and follower.rows == download(world.api, {})
    world.subscribe(2, "trial")  # another feed set: another view
    response = world.api.get("/v1/lineups/changes", params={"cursor": follower.cursor})
    assert assert_error(response, 400, "VALIDATION_ERROR", "cursor")["details"]["reason"] == "cursor_expired"


def test_changes_takes_the_parameters_of_lineups_and_refuses_them_the_same_way(sessions, make_api):
    world = World(sessions, make_api)
    world.ingest(0, 5, 0, 1)
    for params, parameter in (
        ({"port": "rotterdam"}, "port"), ({"limit": "501"}, "limit"), ({"from": "2024-03-02", "to": "2024-03-01"}, "from"),
        ({"commodity": "moon rock"}, "commodity"), ({"latest": "maybe"}, "latest"), ({"colour": "red"}, "colour"),
        ({"cursor": "made-up"}, "cursor"), ({"format": "csv"}, "format"),
    ):
        for path in ("/v1/lineups/changes", "/v1/lineups"):
            if path == "/v1/lineups" and parameter == "format":
                continue
            assert_error(world.api.get(path, params=params), 400, "VALIDATION_ERROR", parameter)
    # A cursor of another query, of /v1/lineups, or of another buyer is refused.
    first = world.api.get("/v1/lineups/changes", params={"limit": 2}).json()
    assert_error(world.api.get("/v1/lineups/changes", params={"latest": "true", "cursor": first["next_cursor"]}),
                 400, "VALIDATION_ERROR", "cursor")
    page = world.api.lineups(limit=2)
    assert_error(world.api.get("/v1/lineups/changes", params={"cursor": page["next_cursor"]}), 400, "VALIDATION_ERROR", "cursor")
    other = World(sessions, make_api)
    assert_error(other.api.get("/v1/lineups/changes", params={"cursor": first["next_cursor"]}), 400, "VALIDATION_ERROR", "cursor")
    assert_error(world.api.get("/v1/lineups/changes", key=None), 401, "UNAUTHORIZED")
    with transaction(sessions) as session:
        assert session.scalar(select(func.count()).select_from(MergedView)) > 0


def test_a_feed_new_to_the_store_then_subscribed_is_never_missed_under_by_source(sessions, make_api):
    world = World(sessions, make_api)
    world.subscribe(2, "active")  # every feed of the store: the reader's feeds are the by_source view's
    world.ingest(0, 6, 0, 1)
    follower = Follower({"merge": "by_source"})
    follower.sync(world.api)
    with transaction(sessions) as session:  # a new feed, its rows written into the view whole
        world.feed_ids.append(feeds.add_feed(session, "A newcomer", ["NLRTM"]).id)
    world.refs[world.feed_ids[3]] = []
    world.ingest(3, 5, 0, 2)
    world.subscribe(3, "active")  # the reader sees every feed again, with no call between
    follower.sync(world.api)
    assert follower.rows == download(world.api, {"merge": "by_source"})
    assert any(row["source_id"] == world.feed_ids[3] for row in follower.rows.values())
