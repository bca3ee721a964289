"""The explorer's "Download CSV (all rows)" (issue 49 item 5): an HTTP download that
the API streams, through its export slots and row ceiling, not a document built in
memory and sent over the websocket. The explorer mounted in the API's application,
as `lineups serve` composes them; a browser-like client (requests) signed in.
"""

from __future__ import annotations

import csv
import io
from urllib.parse import urlencode

import pytest
import requests

from api.app import make_app
from explorer.state import LineupsModel
from store.access import accounts, downloads
from store.database.db import transaction
from store.errors import Unauthorized
from store.fields import RECORD_FIELDS
from store.settings import Settings


def serve(live_explorer, context, **settings):
    """The explorer inside the API's application, with these API settings."""
    api_settings = Settings(db_url="sqlite://", secrets=context.secrets, base_url=context.base_url, **settings)
    return live_explorer(lambda explorer: make_app(api_settings, context.sessions, extra_routes=lambda deps: explorer.routes()))


def download(live, client: requests.Session, args: dict[str, str]) -> requests.Response:
    """The button's link followed as a browser does (the redirect included)."""
    return client.get(f"{live.base_url}/explorer/download?{urlencode(args)}", timeout=60)


def test_the_download_is_the_whole_result_streamed_by_the_api(live_explorer, context, account, sign_in, demo):
    live = serve(live_explorer, context)
    client, _ = sign_in(live, demo["api_key"])
    model = LineupsModel(account)
    model.filters.port = "BRSSZ"
    response = client.get(live.base_url + model.download_path, timeout=60)
    assert response.status_code == 200, response.text
    assert [r.status_code for r in response.history] == [302]
    assert response.history[0].headers["Location"].startswith("/v1/download/dl_")
    assert response.url.startswith(f"{live.base_url}/v1/download/dl_")
    assert response.headers["Content-Type"] == "text/csv; charset=utf-8"
    assert response.headers["Content-Disposition"].startswith('attachment; filename="lineups-')
    assert response.headers["Cache-Control"] == "no-store" and response.headers["Referrer-Policy"] == "no-referrer"
    assert response.content.startswith(b"\xef\xbb\xbf" + ",".join(RECORD_FIELDS).encode() + b"\r\n")
    rows = list(csv.DictReader(io.StringIO(response.content.decode("utf-8-sig"), newline="")))
    result = context.service.frame(account.buyer_id, model.filters.query(context.taxonomy))
    assert len(rows) == model.row_count == len(result) > 50  # every row, not one page
    assert [r["id"] for r in rows] == list(result["id"])  # in C3 order
    # The same rows, the same text, as the API's own pages of the same query.
    pages = requests.get(f"{live.base_url}/v1/lineups", params={"port": "BRSSZ", "format": "csv", "limit": 500},
                         headers={"X-API-Key": demo["api_key"]}, timeout=60)
    assert pages.content == response.content


def test_only_a_signed_in_browser_gets_a_download(live_explorer, context, sign_in, demo, sessions):
    live = serve(live_explorer, context)
    anonymous = requests.get(f"{live.base_url}/explorer/download?port=BRSSZ", allow_redirects=False, timeout=60)
    assert anonymous.status_code == 302 and anonymous.headers["Location"].startswith("/explorer/login")
    client, _ = sign_in(live, demo["api_key"])
    ticket = client.get(f"{live.base_url}/explorer/download?port=BRSSZ", allow_redirects=False, timeout=60)
    target = live.base_url + ticket.headers["Location"]
    assert requests.get(target, timeout=60).status_code == 200  # the ticket alone, for its minute
    altered = target[:-2] + ("AA" if not target.endswith("AA") else "BB")
    assert requests.get(altered, timeout=60).status_code == 401
    client.get(f"{live.base_url}/explorer/logout", timeout=60)
    assert context.book.flush(timeout=60)
    refused = requests.get(target, timeout=60)
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "UNAUTHORIZED"


def test_a_ticket_opens_for_a_minute_only_and_for_a_live_key(context, identity, sessions, demo):
    secrets = context.secrets
    ticket = downloads.ticket_for(secrets, identity.buyer_id, identity.key_id, identity.session_id, {"port": ["BRSSZ"]})
    with transaction(sessions) as session:
        assert downloads.open_ticket(session, ticket, secrets).args == {"port": ["BRSSZ"]}
    with transaction(sessions) as session, pytest.raises(Unauthorized, match="expired"):
        downloads.open_ticket(session, ticket, secrets, max_age=-1)  # as if older than its minute
    with transaction(sessions) as session:
        accounts.revoke_key(session, accounts.find_key(session, demo["api_key"]))
    with transaction(sessions) as session, pytest.raises(Unauthorized, match="revoked"):
        downloads.open_ticket(session, ticket, secrets)


def test_a_download_over_the_ceiling_is_refused_never_cut(live_explorer, context, sign_in, demo):
    live = serve(live_explorer, context, share_ceiling=50)
    client, _ = sign_in(live, demo["api_key"])
    refused = download(live, client, {"source": "all"})
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == "VALIDATION_ERROR" and error["details"]["ceiling"] == 50
    small = download(live, client, {"port": "BRSSZ", "commodity": "Soybeans", "latest": "true"})
    assert small.status_code == 200 and 1 < small.content.count(b"\r\n") <= 51
