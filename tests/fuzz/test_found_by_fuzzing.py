"""What the conformance run found (docs/reliability.md), kept as plain tests so that
it stays fixed even if the fuzzer's seed or version changes."""

from __future__ import annotations

from store.access import links
from store.database.db import transaction
from store.database.schema import Buyer
from store.reference.taxonomy import default_taxonomy
from tests.api.conftest import assert_error


def dated_ids(api, **params) -> set[str]:
    return {row["id"] for row in api.lineups(limit=500, **params)["data"]}


def test_days_beyond_nanosecond_timestamps_filter_instead_of_failing(fresh_tiny_api, fresh_tiny):
    """`from`/`to` before 1677-09-22 or after 2262-04-11 were a 500 (an overflow)."""
    api = fresh_tiny_api
    dated = {row["id"] for row in api.lineups(limit=500)["data"] if row["combined_date"]}
    assert dated_ids(api, **{"from": "0001-01-01"}) == dated
    assert dated_ids(api, to="9999-12-31") == dated
    assert dated_ids(api, **{"from": "0001-01-01", "to": "9999-12-31"}) == dated
    assert dated_ids(api, **{"from": "9999-01-01"}) == set()
    assert dated_ids(api, to="1066-10-14") == set()
    with transaction(api.sessions) as session:
        _, token = links.create_link(session, session.get(Buyer, fresh_tiny["buyer_id"]), {"from": ["1000-01-01"]},
                                     api.settings.signing_secrets())
    assert api.get(f"/v1/share/{token}", key=None).status_code == 200


def test_the_document_lists_the_commodity_names_the_api_takes(fresh_tiny_api):
    """`commodity` was documented as any text, but only taxonomy names are taken."""
    api = fresh_tiny_api
    document = api.get("/v1/openapi.json", key=None).json()
    parameter = document["components"]["parameters"]["commodity"]
    assert (parameter["style"], parameter["explode"], parameter["schema"]["type"]) == ("form", False, "array")
    names = parameter["schema"]["items"]["enum"]
    assert sorted(names) == sorted(default_taxonomy().all_names())
    for name in names:
        assert api.get("/v1/lineups", params={"commodity": name, "limit": 1}).status_code == 200, name
    assert api.get("/v1/lineups", params={"commodity": ",".join(names[:5])}).status_code == 200
    assert_error(api.get("/v1/lineups", params={"commodity": "0"}), 400, "VALIDATION_ERROR", "commodity")


def test_the_document_declares_its_links(fresh_tiny_api):
    """Without them, fuzzers guessed that a merged row's `source_id` (feeds joined by
    `;`) is a `sourceId`; the declared links all lead somewhere real."""
    api = fresh_tiny_api
    document = api.get("/v1/openapi.json", key=None).json()
    operations = {op["operationId"]: op for path in document["paths"].values() for op in path.values()}
    declared = {
        (source, name, link["operationId"], parameter)
        for source, op in operations.items()
        for name, link in op["responses"]["200"].get("links", {}).items()
        for parameter in link["parameters"]
    }
    assert declared == {
        ("listLineups", "provenance", "getProvenance", "id"),
        ("getProvenance", "schema", "getSourceSchema", "sourceId"),
        ("listSources", "schema", "getSourceSchema", "sourceId"),
        ("listSources", "lineups", "listLineups", "source"),
    }
    feed = api.get("/v1/sources").json()["sources"][0]["id"]
    row = api.lineups(source=feed)["data"][0]["id"]
    provenance = api.get(f"/v1/lineups/{row}/provenance", params={"source": feed})
    assert provenance.status_code == 200
    assert api.get(f"/v1/schema/{provenance.json()['records'][0]['source_id']}").status_code == 200


def test_a_nul_character_in_a_name_filter_is_refused_instead_of_failing(fresh_tiny_api, fresh_tiny):
    """Found by schemathesis on PostgreSQL once filters ran in SQL: a NUL byte in
    `country` or `port_name` reached the database as a parameter, which PostgreSQL
    refuses (500). No stored name can hold one (ingest refuses it), and since issue
    49 item 9 a text filter with a control character is the contract's 400 naming
    the parameter (docs/api.md), before any query."""
    for name in ("country", "port_name"):
        response = fresh_tiny_api.get("/v1/lineups", params={name: "Bra\x00zil"})
        assert_error(response, 400, "VALIDATION_ERROR", name)
