"""GET /v1/lineups/{id}/provenance (issue 4): how a merged row was made, for rows the
buyer can see, with the same `merge` and `source` as /v1/lineups."""

from __future__ import annotations

import uuid

import pytest

from tests.api.conftest import assert_error
from tests.api.tiny_data import new_buyer


def provenance(api, row_id: str, **params):
    return api.get(f"/v1/lineups/{row_id}/provenance", params=params)


def test_a_merged_row_names_the_records_it_came_from(tiny_api, tiny):
    merged = tiny_api.lineups()["data"][0]
    response = provenance(tiny_api, merged["id"])
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["id"] == merged["id"] and body["merge"] == "all"
    # Its two records, in C2.5 precedence: B1 (updated 02-15) before A1 (02-10).
    assert [(r["ref"], r["source_id"]) for r in body["records"]] == [("B1", tiny["b"]), ("A1", tiny["a"])]
    fields = body["fields"]
    assert list(fields) == list(merged)
    assert {name: f["value"] for name, f in fields.items()} == merged  # the served row
    assert fields["vessel_name"]["supplied_by"] == [{"ref": "B1", "source_id": tiny["b"]}]
    assert fields["shipper"]["supplied_by"] == [{"ref": "A1", "source_id": tiny["a"]}]
    assert {d["field"] for d in body["disagreements"]} == {"vessel_name", "commodity", "quantity", "vessel_status"}


def test_the_merge_mode_must_match_the_id(tiny_api, tiny):
    merged_id = tiny_api.lineups()["data"][0]["id"]
    by_source = tiny_api.lineups(merge="by_source")["data"]
    assert_error(provenance(tiny_api, merged_id, merge="by_source"), 404, "NOT_FOUND")
    response = provenance(tiny_api, by_source[0]["id"], merge="by_source")
    assert response.status_code == 200
    assert [r["ref"] for r in response.json()["records"]] == ["A1"]
    assert response.json()["merge"] == "by_source"
    assert_error(provenance(tiny_api, by_source[0]["id"]), 404, "NOT_FOUND")


def test_source_narrows_what_is_visible(tiny_api, tiny):
    row_a = tiny_api.lineups(source=tiny["a"])["data"][0]["id"]
    assert provenance(tiny_api, row_a, source=tiny["a"]).status_code == 200
    assert_error(provenance(tiny_api, row_a, source=tiny["b"]), 404, "NOT_FOUND")


@pytest.mark.parametrize(
    "params, status, code, parameter",
    [
        ({"limit": "5"}, 400, "VALIDATION_ERROR", "limit"),
        ({"port": "BRSSZ"}, 400, "VALIDATION_ERROR", "port"),
        ({"merge": "sometimes"}, 400, "VALIDATION_ERROR", "merge"),
        ({"source": "nope"}, 400, "VALIDATION_ERROR", "source"),
        ({"merge": "all", "merge ": "x"}, 400, "VALIDATION_ERROR", "merge "),
        ({"source": str(uuid.uuid4())}, 404, "NOT_FOUND", None),
    ],
)
def test_parameter_errors(tiny_api, params, status, code, parameter):
    assert_error(provenance(tiny_api, "whatever", **params), status, code, parameter)


def test_cancelled_source_is_403(tiny_api, tiny):
    assert_error(provenance(tiny_api, "whatever", source=tiny["c"]), 403, "FORBIDDEN")


def test_an_id_the_buyer_cannot_see_is_404(fresh_tiny_api, fresh_tiny, sessions):
    from store.intake import feeds
    from store.database.db import transaction

    with transaction(sessions) as session:
        _, other_key = new_buyer(session, "Other Buyer", {feeds.find_feed(session, fresh_tiny["c"]): "active"})
    other_row = fresh_tiny_api.get("/v1/lineups", key=other_key).json()["data"][0]["id"]
    assert fresh_tiny_api.get(f"/v1/lineups/{other_row}/provenance", key=other_key).status_code == 200
    assert_error(provenance(fresh_tiny_api, other_row), 404, "NOT_FOUND")
    assert_error(provenance(fresh_tiny_api, "no-such-row"), 404, "NOT_FOUND")


def test_provenance_says_what_the_merge_resolved_and_why(make_api, sessions):
    """Issue 19 rule 4: a name-only record merged as an IMO, an unspecified commodity
    that joined a specific one, each said in plain words with its records."""
    from store.database.db import transaction
    from tests.api.tiny_data import add_feed, add_records

    call = {"eta": "2024-03-10T06:00:00Z", "operation": "load", "quantity": "60000"}
    with transaction(sessions) as session:
        alpha = add_feed(session, "Alpha Lineups", ["BRSSZ"])
        beta = add_feed(session, "Beta", ["BRSSZ"])
        add_records(session, alpha, [
            {**call, "ref": "A1", "port_unlocode": "BRSSZ", "vessel_imo": "9345934", "vessel_name": "HARMONY PACIFIC",
             "commodity": "wheat"},
            {**call, "ref": "A2", "port_unlocode": "AUPHE", "vessel_imo": "9348247", "vessel_name": "MV DAWN CAPE",
             "commodity": "iron ore fines"},
        ])
        add_records(session, beta, [
            {**call, "ref": "B1", "port_unlocode": "BRSSZ", "vessel_name": "Harmony Pacific", "commodity": "wheat",
             "eta": "2024-03-10T12:00:00Z"},
            {**call, "ref": "B2", "port_unlocode": "AUPHE", "vessel_imo": "9348247", "vessel_name": "Dawn Cape",
             "commodity": "iron ore"},
        ])
        _, key = new_buyer(session, "Both", {alpha: "active", beta: "active"})
        _, beta_key = new_buyer(session, "Beta only", {beta: "active"})
    api = make_api(key)
    rows = {r["port_unlocode"]: r for r in api.lineups()["data"]}
    assert len(rows) == 2  # one row per call: the duplicates are resolved
    harmony = provenance(api, rows["BRSSZ"]["id"]).json()
    assert harmony["resolutions"] == [{
        "kind": "vessel",
        "text": "IMO 9345934 from Alpha Lineups, matched by name HARMONY PACIFIC",
        "records": [{"ref": "B1", "source_id": str(beta.id)}],
    }]
    dawn = provenance(api, rows["AUPHE"]["id"]).json()
    assert rows["AUPHE"]["commodity_normalized"] == "Iron Ore Fines"
    assert [r["ref"] for r in dawn["records"]] == ["B2", "A2"] or [r["ref"] for r in dawn["records"]] == ["A2", "B2"]
    assert dawn["resolutions"] == [{
        "kind": "commodity",
        "text": "Iron Ore (Unspecified) from Beta joined Iron Ore Fines",
        "records": [{"ref": "B2", "source_id": str(beta.id)}],
    }]
    # A buyer of Beta alone: nothing to resolve by, nothing resolved.
    alone = api.get("/v1/lineups", key=beta_key).json()["data"]
    assert len(alone) == 2 and {r["vessel_imo"] for r in alone} == {None, "9348247"}
    for row in alone:
        assert api.get(f"/v1/lineups/{row['id']}/provenance", key=beta_key).json()["resolutions"] == []


@pytest.mark.parametrize("row_id", ["%00", "a%00b", "x" * 65, "%E2%82%AC", "..", "a.b"])
def test_an_id_that_cannot_be_one_is_404(tiny_api, row_id):
    """Issue 49 item 9: a NUL in the id was a 500 on PostgreSQL (text cannot hold
    one); an id that cannot be a row's is 404 on both, asked of no store."""
    assert_error(tiny_api.get(f"/v1/lineups/{row_id}/provenance"), 404, "NOT_FOUND")
