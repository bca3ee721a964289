"""GET /v1/lineups (seed 4.1, contract C1–C3, C5): rows, filters, merge modes and
every validation error, over the hand-made data set (see `tiny` in conftest)."""

from __future__ import annotations

import json
import uuid

import pytest

from store.fields import RECORD_FIELDS
from tests.api.conftest import assert_error


def refs(api, **params) -> list[tuple[str, str | None]]:
    """(port, eta) of each row, in order: enough to tell the tiny rows apart."""
    return [(row["port_unlocode"], row["eta"]) for row in api.lineups(**params)["data"]]


MERGED_A1 = ("BRSSZ", "2024-03-06T00:00:00Z")  # A1 + B1: B1's eta is the newer report
A1 = ("BRSSZ", "2024-03-05T06:00:00Z")
B1 = ("BRSSZ", "2024-03-06T00:00:00Z")
A2 = ("BRSSZ", "2024-03-20T00:00:00Z")
A5 = ("BRSSZ", "2024-04-20T00:00:00Z")
A3 = ("BRPNG", None)


def test_rows_are_c1_records_in_c3_order(tiny_api, tiny):
    body = tiny_api.lineups()
    assert list(body) == ["data", "next_cursor", "nextCursor"]
    assert body["next_cursor"] is None and body["nextCursor"] is None
    rows = body["data"]
    assert [(r["port_unlocode"], r["eta"]) for r in rows] == [MERGED_A1, A2, A5, A3]
    for row in rows:
        assert list(row) == list(RECORD_FIELDS)
        assert row["commodity"]  # A4, without a commodity, is never served
    merged, a2 = rows[0], rows[1]
    assert merged["source_id"] == ";".join(sorted([tiny["a"], tiny["b"]]))
    assert merged["source_name"] == "Alpha Santos Lineup;Bravo Santos Reports"
    assert merged["dwt"] == 82000 and isinstance(merged["dwt"], int)
    assert merged["quantity"] == 64000 and isinstance(merged["quantity"], (int, float))
    assert merged["commodity_normalized"] == "Soybeans"
    assert merged["commodity_normalized_subgroup"] == "Grains"
    assert merged["commodity_normalized_group"] == "Dry Bulk"
    assert merged["combined_date"] == "2024-03-06T00:00:00Z"
    assert merged["created_at"] == "2024-02-01T12:00:00Z"
    assert merged["updated_at"] == "2024-02-15T00:00:00Z"
    assert a2["quantity"] == 40000.5
    assert a2["vessel_imo"] is None and a2["dwt"] is None and a2["etb"] is None
    assert a2["charterer"] is None and a2["operator"] is None  # N/A and TBC are blank
    assert a2["ship_agent"] == "Line1\nLine2"
    assert rows[3]["commodity_normalized"] is None and rows[3]["combined_date"] is None


def test_merge_by_source_keeps_one_row_per_feed(tiny_api, tiny):
    rows = tiny_api.lineups(merge="by_source")["data"]
    assert [(r["port_unlocode"], r["eta"]) for r in rows] == [A1, B1, A2, A5, A3]
    assert [r["source_id"] for r in rows[:2]] == [tiny["a"], tiny["b"]]
    assert len({r["id"] for r in rows}) == 5
    # Ids differ between the modes and are stable between requests.
    all_ids = {r["id"] for r in tiny_api.lineups()["data"]}
    assert not all_ids & {r["id"] for r in rows}
    assert all_ids == {r["id"] for r in tiny_api.lineups()["data"]}


@pytest.mark.parametrize(
    "params, expected",
    [
        ({"port": "BRSSZ"}, [MERGED_A1, A2, A5]),
        ({"port": "brpng"}, [A3]),
        ({"country": "bRaZiL"}, [MERGED_A1, A2, A5, A3]),
        ({"country": "Bra"}, []),
        ({"port_name": "ANTO"}, [MERGED_A1, A2, A5]),
        ({"port_name": "paranag"}, [A3]),
        ({"commodity": "soybeans"}, [MERGED_A1, A5]),
        ({"commodity": "GRAINS"}, [MERGED_A1, A5]),
        ({"commodity": "Dry Bulk"}, [MERGED_A1, A5]),
        ({"commodity": "Soybeans, Diesel/Gasoil"}, [MERGED_A1, A2, A5]),
        ({"commodity": "Liquid Bulk"}, [A2]),
        ({"from": "2024-03-08", "to": "2024-03-08"}, [MERGED_A1]),  # span 03-06 .. 03-08
        ({"from": "2024-03-09"}, [A2, A5]),
        ({"to": "2024-03-05"}, []),
        ({"from": "2024-03-20", "to": "2024-03-20"}, [A2]),
        ({"latest": "true"}, [A2, A5, A3]),
        ({"latest": "TRUE", "port": "BRSSZ"}, [A2, A5]),
        ({"latest": "False"}, [MERGED_A1, A2, A5, A3]),
        ({"port": "BRSSZ", "commodity": "soybeans", "from": "2024-04-01"}, [A5]),
        # Issue 45 item 4: the vessel status of the merged row (A1 + B1: B1's newer
        # "berthed"), case-insensitive, a comma list; before `latest` (C3).
        ({"status": "berthed"}, [MERGED_A1]),
        ({"status": "Expected"}, [A5, A3]),
        ({"status": "expected,ANCHORED"}, [A2, A5, A3]),
        ({"status": "expected,anchored,berthed"}, [MERGED_A1, A2, A5, A3]),
        ({"status": "departed"}, []),
        ({"status": "berthed", "latest": "true"}, [MERGED_A1]),
        ({"status": "expected", "merge": "by_source"}, [A1, A5, A3]),
        ({"status": "berthed", "merge": "by_source"}, [B1]),
    ],
)
def test_filters(tiny_api, params, expected):
    assert refs(tiny_api, **params) == expected


def test_source_narrows_to_one_feed(tiny_api, tiny):
    assert refs(tiny_api, source=tiny["a"]) == [A1, A2, A5, A3]
    assert refs(tiny_api, source=tiny["b"]) == [B1]
    assert refs(tiny_api, source="all") == [MERGED_A1, A2, A5, A3]
    assert refs(tiny_api, source=tiny["a"].upper()) == [A1, A2, A5, A3]


def test_source_errors(tiny_api, tiny):
    assert_error(tiny_api.get("/v1/lineups", params={"source": "abc"}), 400, "VALIDATION_ERROR", "source")
    assert_error(tiny_api.get("/v1/lineups", params={"source": str(uuid.uuid4())}), 404, "NOT_FOUND")
    assert_error(tiny_api.get("/v1/lineups", params={"source": tiny["c"]}), 403, "FORBIDDEN")  # cancelled
    assert_error(tiny_api.get("/v1/lineups", params={"source": tiny["d"]}), 403, "FORBIDDEN")  # never subscribed


def test_cancelling_a_subscription_hides_its_rows_at_once(fresh_tiny_api, fresh_tiny, sessions):
    from store.access import accounts
    from store.intake import feeds
    from store.database.db import transaction

    tiny_api, tiny = fresh_tiny_api, fresh_tiny

    # The same page three times: from its second request on, its body is kept.
    bodies = [tiny_api.get("/v1/lineups").content for _ in range(3)]
    assert bodies[0] == bodies[1] == bodies[2] and len(json.loads(bodies[0])["data"]) == 4
    with transaction(sessions) as session:
        buyer = accounts.find_buyer(session, tiny["buyer_id"])
        accounts.set_subscription(session, buyer, feeds.find_feed(session, tiny["b"]), "cancelled")
    rows = tiny_api.lineups()["data"]
    assert [(r["port_unlocode"], r["eta"]) for r in rows] == [A1, A2, A5, A3]
    assert {r["source_id"] for r in rows} == {tiny["a"]}
    assert_error(tiny_api.get("/v1/lineups", params={"source": tiny["b"]}), 403, "FORBIDDEN")


@pytest.mark.parametrize(
    "query, parameter",
    [
        ("vessel=OCEAN", "vessel"),  # not a parameter of the seed's table
        ("port=BRSSZ&port=BRPNG", "port"),  # repeated
        ("limit=0", "limit"),
        ("limit=501", "limit"),
        ("limit=abc", "limit"),
        ("limit=-1", "limit"),
        ("limit=1.5", "limit"),
        ("limit=", "limit"),
        ("latest=yes", "latest"),
        ("latest=1", "latest"),
        ("merge=none", "merge"),
        ("merge=raw", "merge"),
        ("format=xml", "format"),
        ("port=BRSS", "port"),
        ("port=BR-SZ", "port"),
        ("port=12345", "port"),
        ("from=2024-3-1", "from"),
        ("from=01/03/2024", "from"),
        ("to=2024-02-30", "to"),
        ("to=2024-03-01T00:00:00Z", "to"),
        ("from=2024-03-02&to=2024-03-01", "from"),
        ("source=not-a-uuid", "source"),
        ("cursor=made-up", "cursor"),
        ("status=moored", "status"),
        ("status=expected,", "status"),
        ("status=expected&status=berthed", "status"),
    ],
)
def test_validation_errors_name_the_parameter(tiny_api, query, parameter):
    response = tiny_api.get("/v1/lineups?" + query)
    error = assert_error(response, 400, "VALIDATION_ERROR")
    assert error["details"]["parameter"] in (parameter, "to" if parameter == "from" else parameter)


def test_unknown_commodity_suggests_the_closest_names(tiny_api):
    error = assert_error(tiny_api.get("/v1/lineups", params={"commodity": "soybean meel"}), 400, "VALIDATION_ERROR", "commodity")
    assert "Soybean Meal" in error["details"]["suggestions"]
    # The filter takes names (C6); an alias is refused with the name it stands for.
    error = assert_error(tiny_api.get("/v1/lineups", params={"commodity": "soja"}), 400, "VALIDATION_ERROR", "commodity")
    assert error["details"]["suggestions"][0] == "Soybeans"


def test_an_unknown_vessel_status_lists_the_allowed_ones(tiny_api):
    """Issue 45 item 4, C5: the 400 names `status` and the seed's values (C1)."""
    response = tiny_api.get("/v1/lineups", params={"status": "expected,sailing"})
    error = assert_error(response, 400, "VALIDATION_ERROR", "status")
    assert error["details"]["allowed"] == ["expected", "anchored", "berthed", "departed"]
    assert "'sailing'" in error["details"]["reason"] and "expected, anchored, berthed, departed" in error["message"]


def test_a_cursor_is_bound_to_its_statuses(tiny_api):
    """C4: a cursor of `status=expected` is refused under another status filter."""
    cursor = tiny_api.lineups(status="expected", limit="1")["next_cursor"]
    assert cursor
    assert [r["eta"] for r in tiny_api.lineups(status="EXPECTED", limit="1", cursor=cursor)["data"]] == [A3[1]]
    assert_error(
        tiny_api.get("/v1/lineups", params={"status": "expected,anchored", "cursor": cursor}), 400, "VALIDATION_ERROR", "cursor",
    )


def test_limits_at_the_bounds_are_accepted(tiny_api):
    assert len(tiny_api.lineups(limit="1")["data"]) == 1
    assert len(tiny_api.lineups(limit="500")["data"]) == 4


@pytest.mark.parametrize("parameter, value, reason", [
    ("port_name", "a" * 50_001, "must be at most 200 characters"),
    ("port_name", "b" * 201, "must be at most 200 characters"),
    ("country", "c" * 201, "must be at most 200 characters"),
    ("commodity", "Coal," * 250, "must be at most 1,000 characters"),
    ("port_name", "san\x00tos", "must not contain control characters"),
    ("country", "\x00", "must not contain control characters"),
    ("port_name", "san\x1b", "must not contain control characters"),
])
def test_text_filters_have_a_maximum_length_and_no_control_characters(tiny_api, parameter, value, reason):
    """Issue 49 item 9: a port_name of 50,001 characters was a 500 on SQLite ("LIKE
    or GLOB pattern too complex"), a NUL a 500 on PostgreSQL. Both are 400 naming the
    parameter (C5); the longest allowed value is answered."""
    error = assert_error(tiny_api.get("/v1/lineups", params={parameter: value}), 400, "VALIDATION_ERROR", parameter)
    assert error["details"]["reason"] == reason


def test_a_text_filter_of_the_maximum_length_is_answered(tiny_api):
    for parameter in ("port_name", "country"):
        response = tiny_api.get("/v1/lineups", params={parameter: "s" * 200})
        assert response.status_code == 200 and response.json()["data"] == [], parameter
