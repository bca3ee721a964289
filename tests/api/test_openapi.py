"""GET /v1/openapi.json: a valid OpenAPI 3.1 document that real responses match."""

from __future__ import annotations

import re
import uuid

import pytest
from jsonschema import Draft202012Validator

from tests.api.openapi_check import Document


@pytest.fixture
def document(tiny_api) -> Document:
    response = tiny_api.get("/v1/openapi.json", key=None)
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("application/json")
    return Document(response.json())


def test_the_document_is_valid_openapi_3_1(document, tiny_api):
    spec = document.document
    assert spec["openapi"] == "3.1.0"
    assert spec["servers"] == [{"url": tiny_api.base_url}]
    assert spec["components"]["securitySchemes"]["ApiKey"] == {"type": "apiKey", "in": "header", "name": "X-API-Key"}
    validator = pytest.importorskip("openapi_spec_validator")
    validator.validate(spec)
    for name, schema in spec["components"]["schemas"].items():
        Draft202012Validator.check_schema(schema)


def test_parameters_carry_the_c5_rules(document):
    params = {name: p["schema"] for name, p in document.document["components"]["parameters"].items()}
    assert params["limit"] | {} == {"type": "integer", "minimum": 1, "maximum": 500, "default": 100}
    # Enumerations are read in any case (issue 18.9): the document says so exactly.
    assert params["merge"]["pattern"] == "^([Aa][Ll][Ll]|[Bb][Yy]_[Ss][Oo][Uu][Rr][Cc][Ee])$"
    assert params["format"]["pattern"] == "^([Jj][Ss][Oo][Nn]|[Cc][Ss][Vv])$"
    # Issue 18.4: a cursor has one form; `cursor=0` is not schema-valid.
    assert re.fullmatch(params["cursor"]["pattern"].strip("^$"), "0") is None
    assert params["port"]["pattern"] == "^[A-Za-z]{2}[A-Za-z0-9]{3}$"
    assert params["from"]["format"] == "date" and params["to"]["pattern"] == r"^\d{4}-\d{2}-\d{2}$"
    assert params["sourceId"]["format"] == "uuid"
    # Issue 45 item 4: the status filter, a comma list of the seed's values in any case, with an example.
    status = document.document["components"]["parameters"]["status"]
    assert (status["style"], status["explode"], status["example"]) == ("form", False, ["expected", "anchored", "berthed"])
    assert all(re.fullmatch(params["status"]["items"]["pattern"], s) for s in ("expected", "ANCHORED", "Berthed", "departed"))
    assert not re.fullmatch(params["status"]["items"]["pattern"], "moored")
    listed = [p["$ref"].rsplit("/", 1)[1] for p in document.document["paths"]["/v1/lineups"]["get"]["parameters"]]
    from store.query import PARAMETERS

    assert sorted(listed) == sorted(PARAMETERS)


def test_every_path_is_served(document):
    assert set(document.document["paths"]) == {
        "/v1/lineups", "/v1/lineups/changes", "/v1/lineups/{id}/provenance", "/v1/lineups/{id}/history",
        "/v1/sources", "/v1/schema/{sourceId}", "/v1/openapi.json", "/healthz", "/v1/share/{token}",
    }


def test_responses_match_the_document(document, tiny_api, tiny):
    cursor = tiny_api.lineups(limit="1")["next_cursor"]
    row_id = tiny_api.lineups()["data"][0]["id"]
    cases = [
        ("/v1/lineups", "/v1/lineups", {}, "default"),
        ("/v1/lineups", "/v1/lineups", {"limit": "1"}, "default"),
        ("/v1/lineups", "/v1/lineups", {"limit": "1", "cursor": cursor}, "default"),
        ("/v1/lineups", "/v1/lineups", {"format": "csv", "limit": "1"}, "default"),
        ("/v1/lineups", "/v1/lineups", {"merge": "by_source", "latest": "true"}, "default"),
        ("/v1/lineups", "/v1/lineups", {"limit": "0"}, "default"),
        ("/v1/lineups", "/v1/lineups", {"commodity": "nothing-like-it"}, "default"),
        ("/v1/lineups", "/v1/lineups", {"status": "expected,Berthed"}, "default"),
        ("/v1/lineups", "/v1/lineups", {"status": "moored"}, "default"),
        ("/v1/lineups", "/v1/lineups", {"source": tiny["c"]}, "default"),
        ("/v1/lineups", "/v1/lineups", {"source": str(uuid.uuid4())}, "default"),
        ("/v1/lineups", "/v1/lineups", {}, None),
        ("/v1/lineups/changes", "/v1/lineups/changes", {"limit": "1"}, "default"),
        ("/v1/lineups/changes", "/v1/lineups/changes", {"latest": "true", "merge": "by_source"}, "default"),
        ("/v1/lineups/changes", "/v1/lineups/changes", {"cursor": cursor}, "default"),
        ("/v1/lineups/{id}/history", f"/v1/lineups/{row_id}/history", {}, "default"),
        ("/v1/lineups/{id}/history", "/v1/lineups/nope/history", {}, "default"),
        ("/v1/lineups", "/v1/lineups", {}, tiny["suspended_key"]),
        ("/v1/lineups/{id}/provenance", f"/v1/lineups/{row_id}/provenance", {}, "default"),
        ("/v1/lineups/{id}/provenance", "/v1/lineups/unknown/provenance", {}, "default"),
        ("/v1/sources", "/v1/sources", {}, "default"),
        ("/v1/sources", "/v1/sources", {}, "lk_" + "0" * 32),
        ("/v1/schema/{sourceId}", f"/v1/schema/{tiny['a']}", {}, "default"),
        ("/v1/schema/{sourceId}", "/v1/schema/nope", {}, "default"),
        ("/v1/schema/{sourceId}", f"/v1/schema/{tiny['d']}", {}, "default"),
        ("/v1/openapi.json", "/v1/openapi.json", {}, None),
        ("/healthz", "/healthz", {}, None),
    ]
    for template, path, params, key in cases:
        response = tiny_api.get(path, params=params, key=key)
        document.check(template, response)
        head = tiny_api.request("HEAD", path, params=params, key=key)
        assert head.status_code == response.status_code
        document.check(template, head)


def test_rate_limited_responses_match_the_document(make_tiny_api, tiny):
    from api.ratelimit import MemoryLimiter

    api = make_tiny_api(tiny["key"], limiter=MemoryLimiter(1, 60))
    document = Document(api.get("/v1/openapi.json", key=None).json())
    document.check("/v1/sources", api.get("/v1/sources"))
    response = api.get("/v1/sources")
    assert response.status_code == 429
    document.check("/v1/sources", response)


def test_demo_pages_match_the_document(demo_api):
    document = Document(demo_api.get("/v1/openapi.json", key=None).json())
    for params in ({"limit": "500"}, {"merge": "by_source", "limit": "500"}):
        document.check("/v1/lineups", demo_api.get("/v1/lineups", params=params))
    document.check("/v1/sources", demo_api.get("/v1/sources"))
    for mode in ("all", "by_source"):
        for row in demo_api.lineups(merge=mode, limit="500")["data"][::50]:
            response = demo_api.get(f"/v1/lineups/{row['id']}/provenance", params={"merge": mode})
            assert response.status_code == 200
            document.check("/v1/lineups/{id}/provenance", response)
            assert {k: v["value"] for k, v in response.json()["fields"].items()} == row
    for source in demo_api.get("/v1/sources").json()["sources"]:
        document.check("/v1/schema/{sourceId}", demo_api.get(f"/v1/schema/{source['id']}"))


def test_real_cursors_and_share_tokens_have_the_documented_form(document, tiny_api, tiny):
    """Issue 18.4, 18.5: what the service hands out matches the document's patterns."""
    params = {name: p["schema"] for name, p in document.document["components"]["parameters"].items()}
    cursor = tiny_api.lineups(limit="1")["next_cursor"]
    assert re.fullmatch(params["cursor"]["pattern"], cursor)
    for merge, fmt in (("ALL", "CSV"), ("By_Source", "Json")):
        for name, value in (("merge", merge), ("format", fmt)):
            assert re.fullmatch(params[name]["pattern"], value)
        assert tiny_api.get("/v1/lineups", params={"merge": merge, "format": fmt, "limit": "1"}).status_code == 200
    share = document.document["paths"]["/v1/share/{token}"]["get"]
    assert share["security"] == [] and "text/csv" in share["responses"]["200"]["content"]
    from store.access import links

    assert re.fullmatch(share["parameters"][0]["schema"]["pattern"], links.TOKEN_PREFIX + "abc.-_XYZ09")


def test_no_link_feeds_a_merged_source_id_to_the_schema_endpoint(document):
    """Issue 18.4: a merged row's source_id joins several feeds; only /v1/sources and
    provenance records (one feed each) feed /v1/schema/{sourceId}."""
    for path, item in document.document["paths"].items():
        for name, link in item["get"]["responses"]["200"].get("links", {}).items():
            if link["operationId"] == "getSourceSchema":
                assert link["parameters"]["sourceId"] in (
                    "$response.body#/sources/0/id", "$response.body#/records/0/source_id"), (path, name)
    assert "Source" not in document.document["components"]["schemas"]


def test_the_document_cites_no_clause_or_issue_numbers(document):
    """Issue 18.2: integrators read the descriptions; the numbers of the project's own
    decisions and issues mean nothing to them."""
    import json

    text = json.dumps(document.document)
    assert not re.search(r"\bC(1[01]|[1-9])(\.\d+)?\b|\bissue \d+", text), re.search(
        r".{60}(\bC(1[01]|[1-9])(\.\d+)?\b|\bissue \d+).{20}", text
    )
