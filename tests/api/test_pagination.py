"""Keyset pagination and cursors (seed 4.5, contract C4) over the demo data set."""

from __future__ import annotations

import itertools

import pytest

from tests.api.conftest import assert_error


def walk(api, limits, **params) -> list[dict]:
    """Every row of a query, page by page, each page with the next limit of `limits`."""
    rows, cursor = [], None
    for limit in itertools.cycle(limits):
        query = {**params, "limit": str(limit)}
        if cursor:
            query["cursor"] = cursor
        body = api.lineups(**query)
        assert body["next_cursor"] == body["nextCursor"]
        assert len(body["data"]) <= limit
        rows += body["data"]
        cursor = body["next_cursor"]
        if cursor is None:
            return rows
        assert len(body["data"]) == limit  # only the last page is short


def expected_ids(api, demo, **params) -> list[str]:
    """The ids of the query's sorted result, straight from the lineup service."""
    from api.handlers import parse

    query = parse({k: [v] for k, v in params.items()})[0]
    return list(api.deps.lineups.frame(demo["buyer_id"], query)["id"])


@pytest.mark.parametrize("params", [{}, {"merge": "by_source"}, {"latest": "true", "country": "Brazil"}])
def test_walking_all_pages_returns_every_row_once_in_order(demo_api, demo, params):
    ids = expected_ids(demo_api, demo, **params)
    assert len(ids) > 100
    rows = walk(demo_api, [7, 1, 50, 13, 500, 3], **params)
    assert [r["id"] for r in rows] == ids
    assert len(set(ids)) == len(ids)
    dated = [r["combined_date"] for r in rows if r["combined_date"]]
    assert dated == sorted(dated)


def test_the_default_page_is_100_rows(demo_api):
    body = demo_api.lineups()
    assert len(body["data"]) == 100 and body["next_cursor"]


def test_a_cursor_is_opaque_and_url_safe(demo_api):
    cursor = demo_api.lineups(limit="5")["next_cursor"]
    assert cursor and all(c.isalnum() or c in "-_." for c in cursor)


@pytest.fixture
def cursor(demo_api) -> str:
    return demo_api.lineups(limit="5", port="BRSSZ")["next_cursor"]


def test_an_altered_cursor_is_refused(demo_api, cursor):
    for altered in (
        # The signature's last character carries 2 unused bits: change the used ones.
        cursor[:-1] + ("A" if cursor[-1] not in "ABCD" else "w"),
        ("A" if cursor[0] != "A" else "B") + cursor[1:],
        cursor[: len(cursor) // 2],
        cursor + "x",
        "eyJwIjpbbnVsbCwiYWJjIl0sInEiOiJ4In0.bogus",
    ):
        response = demo_api.get("/v1/lineups", params={"limit": "5", "port": "BRSSZ", "cursor": altered})
        assert_error(response, 400, "VALIDATION_ERROR", "cursor")


def test_a_cursor_is_bound_to_its_query(demo_api, cursor):
    for other in (
        {"port": "BRPNG"},
        {"port": "BRSSZ", "merge": "by_source"},
        {"port": "BRSSZ", "format": "csv"},
        {"port": "BRSSZ", "latest": "true"},
        {"port": "BRSSZ", "commodity": "Soybeans"},
        {},
    ):
        response = demo_api.get("/v1/lineups", params={**other, "limit": "5", "cursor": cursor})
        assert_error(response, 400, "VALIDATION_ERROR", "cursor")
    # The same filters written differently are the same query; the limit may change.
    for same in ({"port": "brssz", "limit": "7"}, {"port": "BRSSZ", "source": "all", "merge": "all", "limit": "500"}):
        response = demo_api.get("/v1/lineups", params={**same, "cursor": cursor})
        assert response.status_code == 200, response.text


def test_a_cursor_from_another_secret_is_refused(demo_api, cursor):
    from api.cursors import CursorCodec

    forged = CursorCodec(("another-secret",)).encode(["2024-01-01T00:00:00+00:00", "x"], "whatever")
    response = demo_api.get("/v1/lineups", params={"port": "BRSSZ", "cursor": forged})
    assert_error(response, 400, "VALIDATION_ERROR", "cursor")


def test_cursors_survive_a_secret_roll_over():
    from api.cursors import CursorCodec, binding
    from api.handlers import parse
    from store.settings import Settings

    query = parse({})[0]
    old = CursorCodec(("old-secret",))
    rolled = CursorCodec(("new-secret", "old-secret"))
    bound = binding(query.key(), "json")
    assert rolled.decode(old.encode([None, "x"], bound), bound) == [None, "x"]
    assert Settings(secrets=("new" * 11, "old" * 11)).signing_secrets()[0] == "new" * 11


def test_csv_pages_carry_the_cursor_in_headers(demo_api):
    first = demo_api.get("/v1/lineups", params={"format": "csv", "limit": "40", "port": "BRSSZ"})
    assert first.status_code == 200
    cursor = first.headers["X-Next-Cursor"]
    link = first.headers["Link"]
    assert link.startswith(f"<{demo_api.base_url}/v1/lineups?") and link.endswith('>; rel="next"')
    next_url = link[1: link.index(">")]
    assert "cursor=" in next_url and "format=csv" in next_url and "port=BRSSZ" in next_url
    # Following the Link gives the next page; walking to the end drops the headers.
    pages = [first]
    while "Link" in pages[-1].headers:
        url = pages[-1].headers["Link"][1: pages[-1].headers["Link"].index(">")]
        pages.append(demo_api.http.get(url, headers={"X-API-Key": demo_api.key}, timeout=30))
        assert pages[-1].status_code == 200
    assert "X-Next-Cursor" not in pages[-1].headers
    csv_rows = sum(p.content.count(b"\r\n") - 1 for p in pages)  # minus each header line
    json_rows = walk(demo_api, [500], port="BRSSZ")
    assert csv_rows >= len(json_rows) and len(pages) == -(-len(json_rows) // 40)
    assert cursor != demo_api.lineups(port="BRSSZ", limit="40")["next_cursor"]  # bound to the format
