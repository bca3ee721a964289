"""GET /v1/lineups/{id}/history (issue 46): the stored versions of every record a merged
row merges, oldest first, with when each was replaced: how a call's ETA slipped. Same
rules as provenance."""

from __future__ import annotations

from store.database.db import transaction
from store.database.schema import Feed
from tests.api.conftest import assert_error
from tests.api.tiny_data import TINY_ROWS_A, add_records


def history(api, row_id: str, **params):
    return api.get(f"/v1/lineups/{row_id}/history", params=params)


def test_a_revised_eta_shows_as_two_versions_of_its_record(fresh_tiny_api, fresh_tiny, sessions):
    api, tiny = fresh_tiny_api, fresh_tiny
    revised = {**TINY_ROWS_A[0], "eta": "2024-03-06T18:00:00Z", "vessel_status": "berthed"}
    with transaction(sessions) as session:
        add_records(session, session.get(Feed, tiny["a"]), [revised])
    row = next(r for r in api.lineups()["data"] if r["port_unlocode"] == "BRSSZ" and r["vessel_imo"] == "9321483")
    response = history(api, row["id"])
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["id"] == row["id"] and body["merge"] == "all"
    by_ref = {record["ref"]: record for record in body["records"]}
    assert set(by_ref) == {"A1", "B1"} and by_ref["A1"]["source_id"] == tiny["a"]
    versions = by_ref["A1"]["versions"]
    assert [(v["version"], v["eta"], v["vessel_status"]) for v in versions] == [
        (1, "2024-03-05T06:00:00Z", "expected"), (2, "2024-03-06T18:00:00Z", "berthed"),
    ]
    assert versions[0]["replaced_at"] is not None and versions[1]["replaced_at"] is None
    assert [v["version"] for v in by_ref["B1"]["versions"]] == [1]


def test_history_follows_the_rules_of_provenance(tiny_api, tiny):
    merged_id = tiny_api.lineups()["data"][0]["id"]
    assert_error(history(tiny_api, "no-such-row"), 404, "NOT_FOUND")
    assert_error(history(tiny_api, merged_id, merge="by_source"), 404, "NOT_FOUND")
    assert_error(history(tiny_api, merged_id, colour="red"), 400, "VALIDATION_ERROR", "colour")
    assert_error(history(tiny_api, merged_id, source=tiny["d"]), 403, "FORBIDDEN")
    assert_error(tiny_api.get(f"/v1/lineups/{merged_id}/history", key=None), 401, "UNAUTHORIZED")
