"""Share links through real HTTP (contract C8, C9; the share-link issue).

A link serves the whole /v1/lineups result of its frozen query as CSV, with no
header; every request re-checks the link, the buyer and the feeds.
"""

from __future__ import annotations

import io
import logging

import pandas as pd
import pytest
from itsdangerous import URLSafeSerializer

from api.ratelimit import MemoryLimiter
from store.access import accounts, links
from store.database.db import transaction
from store.errors import ValidationError
from store.fields import RECORD_FIELDS
from store.database.schema import Buyer, Feed, ShareLink
from tests.api.conftest import assert_error

BOM = "\ufeff".encode()


def make_link(api, buyer_id: str, **params) -> tuple[str, str]:
    """A new link of the buyer for `params`; returns (link id, path of its URL)."""
    with transaction(api.sessions) as session:
        buyer = session.get(Buyer, buyer_id)
        link, token = links.create_link(
            session, buyer, {k: [v] for k, v in params.items()}, api.settings.signing_secrets()
        )
        return link.id, f"/v1/share/{token}"


def paged_csv(api, **params) -> bytes:
    """The same query through the paged API, pages joined into one CSV document."""
    body, cursor = b"", None
    while True:
        response = api.get("/v1/lineups", params={**params, "format": "csv", "limit": 37, **({"cursor": cursor} if cursor else {})})
        assert response.status_code == 200, response.text
        content = response.content
        body += content if not body else content.split(b"\r\n", 1)[1]  # header once
        cursor = response.headers.get("X-Next-Cursor")
        if cursor is None:
            return body


def test_c8_link_serves_the_whole_result_as_the_paged_api_does(demo_api, demo):
    _, path = make_link(demo_api, demo["buyer_id"], port="BRSSZ")
    response = demo_api.get(path, key=None)
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"] == "text/csv; charset=utf-8"
    assert response.headers["Cache-Control"] == "no-store"
    assert response.headers["Referrer-Policy"] == "no-referrer"
    assert response.content.startswith(BOM)
    assert response.content == paged_csv(demo_api, port="BRSSZ")
    assert response.content.count(b"\r\n") > 50  # a real sheet, not one page


def test_c8_pandas_reads_a_link_url_as_the_api_rows(demo_api, demo):
    _, path = make_link(demo_api, demo["buyer_id"], commodity="Dry Bulk", merge="by_source")
    frame = pd.read_csv(demo_api.base_url + path, encoding="utf-8-sig", dtype=str, keep_default_na=False)
    assert list(frame.columns) == list(RECORD_FIELDS)
    ids, cursor = [], None
    while True:
        page = demo_api.lineups(commodity="Dry Bulk", merge="by_source", limit=500, **({"cursor": cursor} if cursor else {}))
        ids += [row["id"] for row in page["data"]]
        if not (cursor := page["next_cursor"]):
            break
    assert frame["id"].tolist() == ids
    assert all(";" not in s for s in frame["source_id"])  # by_source: one feed per row


def test_c8_link_is_validated_as_the_api_validates(demo_api, demo):
    api_error = demo_api.get("/v1/lineups", params={"commodity": "coall"}).json()["error"]
    with transaction(demo_api.sessions) as session:
        buyer = session.get(Buyer, demo["buyer_id"])
        with pytest.raises(ValidationError) as refused:
            links.create_link(session, buyer, {"commodity": ["coall"]}, demo_api.settings.signing_secrets())
        for bad in ({"limit": ["5"]}, {"cursor": ["x"]}, {"format": ["json"]}, {"from": ["2024-13-01"]}):
            with pytest.raises(ValidationError):
                links.create_link(session, buyer, bad, demo_api.settings.signing_secrets())
    assert refused.value.body()["error"] == api_error


def test_c8_each_creation_is_a_new_link_with_its_filters_in_the_url(demo_api, demo):
    first_id, first = make_link(demo_api, demo["buyer_id"], port="brssz", commodity="soybeans")
    second_id, second = make_link(demo_api, demo["buyer_id"], port="brssz", commodity="soybeans")
    assert first_id != second_id and first != second
    with transaction(demo_api.sessions) as session:
        stored = session.get(ShareLink, first_id).filters
    assert stored == {"commodity": "Soybeans", "port": "BRSSZ"}  # canonical spelling


def test_c8_use_is_counted_by_get_not_head(fresh_tiny_api, fresh_tiny):
    link_id, path = make_link(fresh_tiny_api, fresh_tiny["buyer_id"])
    head = fresh_tiny_api.request("HEAD", path, key=None)
    assert head.status_code == 200 and head.content == b""
    assert head.headers["Content-Type"] == "text/csv; charset=utf-8"
    assert head.headers["Referrer-Policy"] == "no-referrer"
    options = fresh_tiny_api.request("OPTIONS", path, key=None)
    assert options.status_code == 204 and options.headers["Allow"] == "GET, HEAD, OPTIONS"
    assert_error(fresh_tiny_api.request("POST", path, key=None), 405, "NOT_FOUND")
    for _ in range(2):
        assert fresh_tiny_api.get(path, key=None).status_code == 200
    assert fresh_tiny_api.deps.usage.flush()  # written off the request path (issue 16 item 1)
    with transaction(fresh_tiny_api.sessions) as session:
        link = session.get(ShareLink, link_id)
        assert link.use_count == 2 and link.last_used_at is not None


def test_c8_revoked_link_gives_401_on_the_next_request(fresh_tiny_api, fresh_tiny):
    link_id, path = make_link(fresh_tiny_api, fresh_tiny["buyer_id"])
    assert fresh_tiny_api.get(path, key=None).status_code == 200
    with transaction(fresh_tiny_api.sessions) as session:
        links.revoke_link(session, session.get(ShareLink, link_id))
    assert_error(fresh_tiny_api.get(path, key=None), 401, "UNAUTHORIZED")


def test_c8_suspended_buyer_gives_403_and_resuming_restores(fresh_tiny_api, fresh_tiny):
    _, path = make_link(fresh_tiny_api, fresh_tiny["buyer_id"])

    def set_status(status):
        with transaction(fresh_tiny_api.sessions) as session:
            accounts.set_buyer_status(session, session.get(Buyer, fresh_tiny["buyer_id"]), status)

    set_status("suspended")
    assert_error(fresh_tiny_api.get(path, key=None), 403, "FORBIDDEN")
    set_status("active")
    assert fresh_tiny_api.get(path, key=None).status_code == 200


def _set_subscription(api, buyer_id, feed_id, status):
    with transaction(api.sessions) as session:
        accounts.set_subscription(session, session.get(Buyer, buyer_id), session.get(Feed, feed_id), status)


def _sources(csv_bytes: bytes) -> set[str]:
    frame = pd.read_csv(io.BytesIO(csv_bytes), encoding="utf-8-sig", dtype=str, keep_default_na=False)
    return {s for value in frame["source_id"] for s in value.split(";")}


def test_c8_cancelled_feeds_stop_contributing_at_once(fresh_tiny_api, fresh_tiny):
    buyer, a, b = fresh_tiny["buyer_id"], fresh_tiny["a"], fresh_tiny["b"]
    _, all_feeds = make_link(fresh_tiny_api, buyer)
    _, only_a = make_link(fresh_tiny_api, buyer, source=a)
    assert _sources(fresh_tiny_api.get(all_feeds, key=None).content) == {a, b}
    _set_subscription(fresh_tiny_api, buyer, a, "cancelled")
    assert _sources(fresh_tiny_api.get(all_feeds, key=None).content) == {b}
    assert_error(fresh_tiny_api.get(only_a, key=None), 403, "FORBIDDEN")
    _set_subscription(fresh_tiny_api, buyer, b, "cancelled")
    assert_error(fresh_tiny_api.get(all_feeds, key=None), 403, "FORBIDDEN")  # none left
    _set_subscription(fresh_tiny_api, buyer, a, "trial")
    assert fresh_tiny_api.get(only_a, key=None).status_code == 200


def test_c8_tampered_or_foreign_tokens_give_401(fresh_tiny_api, fresh_tiny):
    link_id, path = make_link(fresh_tiny_api, fresh_tiny["buyer_id"], port="BRSSZ")
    token = path.rsplit("/", 1)[1]
    payload = {"l": link_id, "q": {"port": "BRSSZ"}}
    forged = [
        token[:-5] + ("A" if token[-5] != "A" else "B") + token[-4:],  # flipped signature
        token[:5] + ("x" if token[5] != "x" else "y") + token[6:],  # flipped payload
        URLSafeSerializer("another secret", salt=links.SALT).dumps(payload),
        URLSafeSerializer(fresh_tiny_api.settings.signing_secrets(), salt="another salt").dumps(payload),
        URLSafeSerializer(fresh_tiny_api.settings.signing_secrets(), salt=links.SALT).dumps(
            {"l": link_id, "q": {"port": "NLRTM"}}  # other filters under a real link id
        ),
        "not-a-token",
    ]
    for bad in forged:
        assert_error(fresh_tiny_api.get(f"/v1/share/{bad}", key=None), 401, "UNAUTHORIZED")
    assert fresh_tiny_api.get(path, key=None).status_code == 200


def test_c8_result_over_the_ceiling_asks_for_narrower_filters(make_api, fresh_tiny, sessions, store_settings):
    import dataclasses

    from tests.api.conftest import Servers

    api = make_api(fresh_tiny["key"])
    _, path = make_link(api, fresh_tiny["buyer_id"])
    rows = api.get(path, key=None).content.count(b"\r\n") - 1
    assert rows >= 2
    servers = Servers(sessions, dataclasses.replace(store_settings, share_ceiling=rows - 1))
    try:
        limited = servers(fresh_tiny["key"])
        error = assert_error(limited.get(path, key=None), 400, "VALIDATION_ERROR")
    finally:
        servers.stop()
    assert "narrower filters" in error["message"]
    assert error["details"]["rows"] == rows and error["details"]["ceiling"] == rows - 1


def test_c5_links_are_rate_limited_per_link(make_api, fresh_tiny):
    api = make_api(fresh_tiny["key"], limiter=MemoryLimiter(3, 60))
    _, first = make_link(api, fresh_tiny["buyer_id"])
    _, second = make_link(api, fresh_tiny["buyer_id"], port="BRSSZ")
    answers = [api.get(first, key=None) for _ in range(4)]
    assert [r.status_code for r in answers[:3]] == [200, 200, 200]
    assert [r.headers["X-RateLimit-Remaining"] for r in answers[:3]] == ["2", "1", "0"]
    refused = assert_error(answers[3], 429, "RATE_LIMITED")
    assert 1 <= int(answers[3].headers["Retry-After"]) <= 60 and refused
    assert api.get(second, key=None).status_code == 200  # another link, its own count


def test_c8_tokens_never_reach_the_logs(fresh_tiny_api, fresh_tiny, caplog):
    _, path = make_link(fresh_tiny_api, fresh_tiny["buyer_id"])
    token = path.rsplit("/", 1)[1]
    with caplog.at_level(logging.DEBUG):
        fresh_tiny_api.get(path, key=None)
        fresh_tiny_api.get(path[:-2] + "xx", key=None)
    server = [r for r in caplog.records if r.name.startswith(("lineups", "tornado"))]  # not the client's
    assert any(r.name == "lineups.access" for r in server), "the access log wrote nothing"
    assert all(token not in r.getMessage() and token[:20] not in r.getMessage() for r in server)


def test_c8_link_url_variants_serve_the_same_sheet(fresh_tiny_api, fresh_tiny):
    """`.csv` at the end (for tools that type files by extension) and a query string
    (a spreadsheet's cache-buster) name the same link."""
    _, path = make_link(fresh_tiny_api, fresh_tiny["buyer_id"])
    plain = fresh_tiny_api.get(path, key=None).content
    assert fresh_tiny_api.get(path + ".csv", key=None).content == plain
    assert fresh_tiny_api.get(path + "?refresh=2", key=None).content == plain


def test_issue_45_a_link_freezes_its_vessel_statuses(demo_api, demo):
    """Issue 45 item 4, C8: `status` is frozen like every filter, in one spelling, and
    the sheet is the paged API's rows of those statuses."""
    link_id, path = make_link(demo_api, demo["buyer_id"], status="Berthed,ANCHORED", port="brssz")
    with transaction(demo_api.sessions) as session:
        assert session.get(ShareLink, link_id).filters == {"port": "BRSSZ", "status": "anchored,berthed"}
    sheet = demo_api.get(path, key=None)
    assert sheet.status_code == 200
    assert sheet.content == paged_csv(demo_api, port="BRSSZ", status="anchored,berthed")
    statuses = set(pd.read_csv(io.BytesIO(sheet.content), encoding="utf-8-sig")["vessel_status"])
    assert statuses == {"anchored", "berthed"}
    with pytest.raises(ValidationError) as refused, transaction(demo_api.sessions) as session:
        links.create_link(session, session.get(Buyer, demo["buyer_id"]), {"status": ["gone"]}, demo_api.settings.signing_secrets())
    assert refused.value.details["parameter"] == "status"
