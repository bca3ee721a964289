"""GET /v1/sources and GET /v1/schema/{sourceId} (seed 4.2, 4.3, contract C7)."""

from __future__ import annotations

import uuid

import pytest

from store.fields import RECORD_FIELDS
from tests.api.conftest import assert_error


def test_sources_are_the_entitled_feeds_by_name(tiny_api, tiny):
    response = tiny_api.get("/v1/sources")
    assert response.status_code == 200
    assert response.json() == {
        "sources": [
            {
                "id": tiny["a"],
                "name": "Alpha Santos Lineup",
                "port_name": "Santos",
                "port_unlocode": "BRSSZ",
                "ports": [
                    {"unlocode": "BRSSZ", "name": "Santos", "country_name": "Brazil"},
                    {"unlocode": "BRPNG", "name": "Paranagua", "country_name": "Brazil"},
                ],
                "frequency": "daily",
                "feed_type": "agency",
                "coverage_rating": 4.5,
                "commodity_rating": 4.0,
                "commercial_rating": 3.5,
                "subscription_status": "active",
            },
            {
                "id": tiny["b"],
                "name": "Bravo Santos Reports",
                "port_name": "Santos",
                "port_unlocode": "BRSSZ",
                "ports": [{"unlocode": "BRSSZ", "name": "Santos", "country_name": "Brazil"}],
                "frequency": "weekly",
                "feed_type": None,
                "coverage_rating": None,
                "commodity_rating": None,
                "commercial_rating": None,
                "subscription_status": "trial",
            },
        ]
    }


def test_sources_of_the_demo_buyer(demo_api, demo):
    names = [s["name"] for s in demo_api.get("/v1/sources").json()["sources"]]
    entitled = sorted(f["name"] for f in demo["feeds"] if f["subscription"] in ("active", "trial"))
    assert names == entitled and "Europe Ports Lineup" not in names


def test_sources_take_no_parameters(tiny_api):
    assert_error(tiny_api.get("/v1/sources", params={"limit": "5"}), 400, "VALIDATION_ERROR", "limit")


# ---------------------------------------------------------------- schema
COVERAGE_A = {
    # Feed A holds 5 records (A4 has no commodity: counted here, never served).
    "id": 1.0, "source_id": 1.0, "source_name": 1.0, "port_unlocode": 1.0, "port_name": 1.0,
    "country_name": 1.0, "berth_terminal": 0.2, "vessel_imo": 0.6, "vessel_name": 1.0,
    "vessel_type": 0.4, "dwt": 0.2, "operation": 0.6, "commodity": 0.8, "commodity_normalized": 0.6,
    "commodity_normalized_group": 0.6, "commodity_normalized_subgroup": 0.6, "quantity": 0.6,
    "quantity_unit": 0.6, "eta": 0.8, "etb": 0.2, "etd": 0.2, "combined_date": 0.8, "vessel_status": 0.8,
    "shipper": 0.4, "receiver": 0.6, "charterer": 0.2, "operator": 0.2, "ship_agent": 0.4,
    "created_at": 1.0, "updated_at": 1.0,
}


def test_schema_of_a_feed_counts_its_records(tiny_api, tiny):
    response = tiny_api.get(f"/v1/schema/{tiny['a']}")
    assert response.status_code == 200
    body = response.json()
    assert list(body) == ["source_id", "source_name", "record_count", "first_date", "last_date", "updated_at", "fields"]
    assert body["source_id"] == tiny["a"] and body["source_name"] == "Alpha Santos Lineup"
    assert body["record_count"] == 5
    assert body["first_date"] == "2024-03-02T00:00:00Z"
    assert body["last_date"] == "2024-04-20T00:00:00Z"
    assert body["updated_at"] == "2024-02-20T00:00:00Z"
    fields = {f["name"]: f for f in body["fields"]}
    assert [f["name"] for f in body["fields"]] == list(RECORD_FIELDS)
    assert {name: f["coverage"] for name, f in fields.items()} == COVERAGE_A
    assert fields["dwt"]["type"] == "integer" and fields["quantity"]["type"] == "number"
    assert fields["eta"]["type"] == "date-time" and fields["vessel_name"]["type"] == "string"
    assert fields["id"]["nullable"] is False and fields["commodity"]["nullable"] is False
    assert fields["etb"]["nullable"] is True and fields["commodity_normalized"]["nullable"] is True
    assert fields["operation"]["values"] == [
        {"value": "load", "count": 2}, {"value": "disch", "count": 1},
        {"value": "bunker", "count": 0}, {"value": "husbandry", "count": 0},
    ]
    assert fields["vessel_status"]["values"][:2] == [{"value": "expected", "count": 3}, {"value": "anchored", "count": 1}]
    assert fields["quantity_unit"]["values"] == [
        {"value": "MT", "count": 3}, {"value": "BBL", "count": 0}, {"value": "Units", "count": 0},
    ]
    assert {v["value"]: v["count"] for v in fields["vessel_type"]["values"]}["Tanker"] == 1
    assert all("values" not in f for n, f in fields.items() if n not in ("operation", "vessel_status", "quantity_unit", "vessel_type"))


def test_schema_of_a_trial_feed(tiny_api, tiny):
    body = tiny_api.get(f"/v1/schema/{tiny['b'].upper()}").json()
    assert body["source_id"] == tiny["b"]
    assert body["record_count"] == 1
    assert body["first_date"] == body["last_date"] == "2024-03-06T00:00:00Z"


def test_schema_of_a_feed_without_records(fresh_tiny_api, fresh_tiny, sessions):
    from store.access import accounts
    from store.intake import feeds
    from store.database.db import transaction

    with transaction(sessions) as session:
        empty = feeds.add_feed(session, "Echo Empty", ["BRSSZ"])
        buyer = accounts.find_buyer(session, fresh_tiny["buyer_id"])
        accounts.set_subscription(session, buyer, empty, "active")
        empty_id = empty.id
    body = fresh_tiny_api.get(f"/v1/schema/{empty_id}").json()
    assert body["record_count"] == 0
    assert body["first_date"] is body["last_date"] is body["updated_at"] is None
    assert {f["coverage"] for f in body["fields"]} == {0.0}


@pytest.mark.parametrize(
    "which, status, code",
    [("not-a-uuid", 400, "VALIDATION_ERROR"), ("unknown", 404, "NOT_FOUND"), ("c", 403, "FORBIDDEN"), ("d", 403, "FORBIDDEN")],
)
def test_schema_errors_follow_the_source_rules(tiny_api, tiny, which, status, code):
    source = {"not-a-uuid": "not-a-uuid", "unknown": str(uuid.uuid4())}.get(which) or tiny[which]
    error = assert_error(tiny_api.get(f"/v1/schema/{source}"), status, code)
    if code == "VALIDATION_ERROR":
        assert error["details"]["parameter"] == "sourceId"


def test_schema_takes_no_parameters(tiny_api, tiny):
    assert_error(tiny_api.get(f"/v1/schema/{tiny['a']}", params={"x": "1"}), 400, "VALIDATION_ERROR", "x")
