"""Isolation between buyers (OWASP API1, broken object-level authorisation; issue 9).

Buyer A is the hand-made data's Tiny Buyer (feeds A active, B trial, C cancelled).
Buyer B subscribes feed B (shared with A) and a feed E of its own, whose records
report the same vessel call as A's. B knows every id A sees (feeds, rows, links) and
tries them all: B never sees a feed, a row, a record, a schema or a link of A's
beyond what the shared feed B gives both.
"""

from __future__ import annotations

import csv
import io
import uuid

import pytest
from itsdangerous import URLSafeSerializer

from store.access import links
from store.database.db import transaction
from store.errors import NotFound
from store.database.schema import Buyer, Feed
from tests.api.conftest import assert_error
from tests.api.tiny_data import add_feed, add_records, new_buyer

ROWS_E = [
    {"ref": "E1", "port_unlocode": "BRSSZ", "vessel_imo": "9321483", "vessel_name": "Ocean Star",
     "commodity": "Soybeans", "eta": "2024-03-05T12:00:00Z", "receiver": "Other Trader Ltd"},
    {"ref": "E2", "port_unlocode": "SGSIN", "vessel_name": "Lion City", "commodity": "Coal", "eta": "2024-03-09T00:00:00Z"},
]


@pytest.fixture
def buyers(fresh_tiny_api, fresh_tiny):
    """(api with A's key, api with B's key, ids): ids has "a".."e", "buyer_a", "buyer_b"."""
    with transaction(fresh_tiny_api.sessions) as session:
        feed_e = add_feed(session, "Echo B Only", ["BRSSZ", "SGSIN"])
        add_records(session, feed_e, ROWS_E)
        buyer_b, key_b = new_buyer(session, "Buyer B", {feed_e: "active", session.get(Feed, fresh_tiny["b"]): "active"})
        ids = {**fresh_tiny, "e": feed_e.id, "buyer_a": fresh_tiny["buyer_id"], "buyer_b": buyer_b.id}
    api_b = type(fresh_tiny_api)(fresh_tiny_api.server, key_b, fresh_tiny_api.sessions, fresh_tiny_api.settings)
    return fresh_tiny_api, api_b, ids


def every_row(api, **params) -> list[dict]:
    rows, cursor = [], None
    while True:
        page = api.lineups(limit=2, **params, **({"cursor": cursor} if cursor else {}))
        rows += page["data"]
        if not (cursor := page["next_cursor"]):
            return rows


def feeds_of(row: dict) -> set[str]:
    return set(row["source_id"].split(";"))


def test_b_lists_only_its_own_feeds(buyers):
    _, b, ids = buyers
    assert {s["id"] for s in b.get("/v1/sources").json()["sources"]} == {ids["b"], ids["e"]}


@pytest.mark.parametrize("feed", ["a", "c", "d"])
def test_b_cannot_read_or_describe_feeds_it_does_not_subscribe(buyers, feed):
    _, b, ids = buyers
    assert_error(b.get("/v1/lineups", params={"source": ids[feed]}), 403, "FORBIDDEN")
    assert_error(b.get("/v1/lineups", params={"source": ids[feed].upper(), "format": "csv"}), 403, "FORBIDDEN")
    assert_error(b.get(f"/v1/schema/{ids[feed]}"), 403, "FORBIDDEN")
    assert_error(b.get("/v1/lineups/x/provenance", params={"source": ids[feed]}), 403, "FORBIDDEN")


def test_b_sees_rows_of_its_feeds_only_in_json_and_csv(buyers):
    _, b, ids = buyers
    allowed = {ids["b"], ids["e"]}
    for merge in ("all", "by_source"):
        rows = every_row(b, merge=merge)
        assert rows and all(feeds_of(r) <= allowed for r in rows), rows
        sheet = b.get("/v1/lineups", params={"merge": merge, "format": "csv", "limit": 500})
        records = list(csv.DictReader(io.StringIO(sheet.content.decode("utf-8-sig"))))
        assert [r["id"] for r in records] == [r["id"] for r in rows]
        assert all(set(r["source_id"].split(";")) <= allowed for r in records)


def test_b_gets_404_for_every_row_a_sees_through_a_feed_b_lacks(buyers):
    a, b, ids = buyers
    mine = {(mode, r["id"]) for mode in ("all", "by_source") for r in every_row(b, merge=mode)}
    guessed = 0
    for mode in ("all", "by_source"):
        for row in every_row(a, merge=mode):
            if (mode, row["id"]) in mine:
                assert feeds_of(row) <= {ids["b"], ids["e"]}  # only the shared feed's rows
                continue
            guessed += 1
            response = b.get(f"/v1/lineups/{row['id']}/provenance", params={"merge": mode})
            error = assert_error(response, 404, "NOT_FOUND")
            unknown = assert_error(b.get(f"/v1/lineups/{row['id']}x/provenance", params={"merge": mode}), 404, "NOT_FOUND")
            # The same answer as for an id that never existed: no existence oracle.
            assert error["message"].replace(row["id"], "ID") == unknown["message"].replace(row["id"] + "x", "ID")
            assert a.get(f"/v1/lineups/{row['id']}/provenance", params={"merge": mode}).status_code == 200
    assert guessed >= 4


def test_a_cursor_carries_no_rows_across_buyers(buyers):
    a, b, ids = buyers
    cursor = a.lineups(limit=1)["next_cursor"]
    response = b.get("/v1/lineups", params={"limit": 500, "cursor": cursor})
    assert response.status_code == 200  # a cursor is a position, not a grant
    assert all(feeds_of(r) <= {ids["b"], ids["e"]} for r in response.json()["data"])


def test_b_cannot_manage_forge_or_widen_a_link_of_a(buyers):
    a, b, ids = buyers
    secrets = a.settings.signing_secrets()
    with transaction(a.sessions) as session:
        link, token = links.create_link(session, session.get(Buyer, ids["buyer_a"]), {"port": ["BRSSZ"]}, secrets)
        link_id = link.id
    # The API is read-only: no method of B's (or anyone's) changes a link.
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        assert_error(b.request(method, f"/v1/share/{token}"), 405, "NOT_FOUND")
    # Link management (explorer, store) is scoped to the link's buyer.
    with transaction(a.sessions) as session:
        with pytest.raises(NotFound):
            links.find_link(session, link_id, ids["buyer_b"])
        assert link_id not in {l.id for l in links.list_links(session, ids["buyer_b"])}
        assert session.get(type(link), link_id).revoked_at is None
    # Guessing: the link's id as a token, or the id with filters signed by anyone but us.
    forged = URLSafeSerializer("guess", salt=links.SALT).dumps({"l": link_id, "q": {"port": "BRSSZ"}})
    for guess in (link_id, forged, str(uuid.uuid4())):
        assert_error(b.get(f"/v1/share/{guess}", key=None), 401, "UNAUTHORIZED")
    # B's own link shows B's feeds only, never A's.
    with transaction(b.sessions) as session:
        _, own = links.create_link(session, session.get(Buyer, ids["buyer_b"]), {}, secrets)
    sheet = b.get(f"/v1/share/{own}", key=None)
    records = list(csv.DictReader(io.StringIO(sheet.content.decode("utf-8-sig"))))
    assert records and all(set(r["source_id"].split(";")) <= {ids["b"], ids["e"]} for r in records)
    # A link is a bearer URL (C8: treat it like a password): it serves its owner's view
    # to whoever holds it, and B's key neither widens nor narrows that.
    assert b.get(f"/v1/share/{token}").content == a.get(f"/v1/share/{token}", key=None).content
