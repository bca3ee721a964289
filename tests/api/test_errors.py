"""Errors (seed section 7, contract C5): the body shape everywhere, unknown paths and
methods, request ids, unexpected failures, and logs that never hold a key."""

from __future__ import annotations

import logging
import os

import pytest

from api.request import RequestIds
from tests.api.conftest import assert_error
from tests.waiting import until


def test_unknown_path_is_404_with_the_error_body(tiny_api):
    assert_error(tiny_api.get("/v1/nothing-here"), 404, "NOT_FOUND")
    assert_error(tiny_api.get("/"), 404, "NOT_FOUND")
    assert_error(tiny_api.get("/v1/lineups/"), 404, "NOT_FOUND")
    # Unknown paths answer 404 with or without a key, whatever the method.
    assert_error(tiny_api.get("/v2/lineups", key=None), 404, "NOT_FOUND")
    assert_error(tiny_api.request("POST", "/v1/nowhere"), 404, "NOT_FOUND")


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
def test_other_methods_are_405_with_allow(tiny_api, method):
    response = tiny_api.request(method, "/v1/lineups", data=b"{}")
    assert_error(response, 405, "NOT_FOUND")
    assert response.headers["Allow"] == "GET, HEAD"
    # Without a key too: the method is refused before the key is asked for.
    response = tiny_api.request(method, "/v1/sources", key=None)
    assert_error(response, 405, "NOT_FOUND")
    assert response.headers["Allow"] == "GET, HEAD"


def test_head_answers_like_get_without_a_body(tiny_api):
    get = tiny_api.get("/v1/sources")
    head = tiny_api.request("HEAD", "/v1/sources")
    assert head.status_code == 200 and head.content == b""
    assert head.headers["Content-Length"] == str(len(get.content))
    assert tiny_api.request("HEAD", "/v1/sources", key=None).status_code == 401


def test_every_response_has_a_fresh_request_id(tiny_api):
    ids = set()
    for response in (
        tiny_api.get("/v1/sources"),
        tiny_api.get("/v1/sources", key=None),
        tiny_api.get("/v1/nothing"),
        tiny_api.get("/healthz", key=None),
        tiny_api.get("/v1/openapi.json", key=None),
        tiny_api.get("/v1/lineups", params={"limit": "0"}),
        tiny_api.get("/v1/sources", headers={"X-Request-Id": "client-chosen"}),
    ):
        request_id = response.headers["X-Request-Id"]
        assert len(request_id) == 32 and int(request_id, 16) >= 0
        ids.add(request_id)
    assert len(ids) == 7


def server_log(caplog) -> str:
    """What the server logged (the test's own HTTP client logs URLs too)."""
    return "\n".join(
        f"{r.getMessage()}\n{r.exc_text or ''}"
        for r in caplog.records
        if r.name.startswith(("lineups", "tornado"))
    )


class Boom(RuntimeError):
    pass


def test_unexpected_failure_is_500_naming_the_request_id(tiny_api, tiny, caplog, monkeypatch):
    def explode(*args, **kwargs):
        raise Boom("secret internals: /srv/app/db.py line 42")

    monkeypatch.setattr(tiny_api.deps.lineups, "page", explode)
    with caplog.at_level(logging.DEBUG):
        response = tiny_api.get("/v1/lineups")
    error = assert_error(response, 500, "INTERNAL_ERROR")
    request_id = response.headers["X-Request-Id"]
    assert request_id in error["message"]
    assert "secret internals" not in response.text and "Boom" not in response.text
    assert response.headers["X-RateLimit-Limit"] and response.headers["X-RateLimit-Remaining"]
    # Logged server-side with the traceback and the request id …
    logged = [r for r in caplog.records if r.levelno >= logging.ERROR and request_id in r.getMessage()]
    assert logged and logged[0].exc_info and logged[0].exc_info[0] is Boom
    # … and the access log line, but never the key.
    assert until(  # the server logs a request just after sending its response
        lambda: any(r.name == "lineups.access" and request_id in r.getMessage() for r in caplog.records))
    assert tiny["key"] not in server_log(caplog)


def test_logs_never_hold_an_api_key(tiny_api, tiny, caplog):
    with caplog.at_level(logging.DEBUG):
        tiny_api.get("/v1/sources")
        tiny_api.get("/v1/lineups", params={"limit": "9999"})
        tiny_api.get("/v1/sources", key=tiny["revoked_key"])
        tiny_api.get("/v1/sources", key=tiny["suspended_key"])
        tiny_api.get("/v1/nothing")
        tiny_api.get("/v1/share/secret-token-value", key=None)
    assert until(  # the server logs a request just after sending its response
        lambda: "/v1/share/<token>" in server_log(caplog))
    text = server_log(caplog)
    for key in (tiny["key"], tiny["revoked_key"], tiny["suspended_key"]):
        assert key not in text
    assert "secret-token-value" not in text
    assert "/v1/share/<token>" in text
    access = [r.getMessage() for r in caplog.records if r.name == "lineups.access"]
    assert any(line.startswith("GET /v1/sources 200 ") for line in access)
    assert any(line.startswith("GET /v1/lineups 400 ") for line in access)


def test_healthz_checks_the_store_without_a_key(tiny_api):
    response = tiny_api.get("/healthz", key=None)
    assert response.status_code == 200 and response.json() == {"status": "ok"}
    assert "X-RateLimit-Limit" not in response.headers


def test_healthz_fails_when_the_store_does_not_answer(make_api, tmp_path):
    from store.database.db import make_engine, make_sessionmaker

    unreachable = make_sessionmaker(make_engine(f"sqlite:///{tmp_path}/missing-dir/none.db"))
    api = make_api(None, sessions=unreachable)
    response = api.get("/healthz", key=None)
    assert_error(response, 500, "INTERNAL_ERROR")
    assert response.headers["X-Request-Id"] in response.json()["error"]["message"]


def test_request_ids_of_a_forked_server_process_are_its_own():
    ids = RequestIds()
    parent = [ids(), ids()]
    assert parent[0] != parent[1] and parent[0][:16] == parent[1][:16]
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # a worker of `lineups serve --processes N`
        os.write(writer, ids().encode())
        os._exit(0)
    os.waitpid(child, 0)
    child_id = os.read(reader, 64).decode()
    assert len(child_id) == 32 and int(child_id, 16) >= 0
    assert child_id[:16] != parent[0][:16]


def test_every_response_says_its_type_is_not_to_be_sniffed(tiny_api):
    """A body is what its Content-Type says, for data, errors and documents alike
    (issue 45 item 2): a browser never reads a CSV or an error as HTML."""
    for response in (
        tiny_api.get("/v1/sources"),
        tiny_api.get("/v1/lineups", params={"format": "csv"}),
        tiny_api.get("/v1/sources", key=None),
        tiny_api.get("/v1/nothing"),
        tiny_api.get("/v1/lineups", params={"limit": "0"}),
        tiny_api.get("/v1/share/not-a-token", key=None),
        tiny_api.get("/healthz", key=None),
        tiny_api.get("/v1/openapi.json", key=None),
        tiny_api.request("POST", "/v1/lineups"),
    ):
        assert response.headers["X-Content-Type-Options"] == "nosniff", (response.url, response.status_code)


@pytest.mark.parametrize("path, status, code", [
    ("/v1/schema/%ff", 400, "VALIDATION_ERROR"),
    ("/v1/lineups/%ff/provenance", 404, "NOT_FOUND"),
    ("/v1/lineups/%c3%28/provenance", 404, "NOT_FOUND"),
])
def test_a_path_that_is_not_utf8_is_admitted_like_any_other(tiny_api, path, status, code):
    """Issue 49 item 10: a path whose bytes are not UTF-8 used to get Tornado's HTML
    "Bad request (400)" before the key was checked or the request counted. It goes
    through the same admission and gets the contract's error body (C5)."""
    assert_error(tiny_api.get(path, key=None), 401, "UNAUTHORIZED")
    response = tiny_api.get(path)
    assert_error(response, status, code, parameter="sourceId" if code == "VALIDATION_ERROR" else None)
    limit = int(response.headers["X-RateLimit-Limit"])
    assert 0 <= int(response.headers["X-RateLimit-Remaining"]) < limit  # counted
