"""The explorer's page embeds Bokeh's session token, which page script can read:
it carries no cookie and no credential of the request (issue 49 item 1). Before,
it held every cookie of the page request (the HttpOnly session cookie and `_xsrf`),
so page script could read the session cookie, and a lifted copy opened the
explorer from another client.

The explorer is served in this process (tests/explorer's `live_explorer`, the demo
data set); the browser is Debian's Chromium through Playwright.
"""

from __future__ import annotations

import json
import re

import pytest
import requests
from bokeh.util.token import get_token_payload

from explorer.auth import COOKIE, TOKEN_IDENTITY
from tests.explorer.conftest import _sign_in, backend, context, demo, demo_template, live_explorer  # noqa: F401
from tests.reliability.test_explorer_sessions import chromium  # noqa: F401 - fixture


def tokens_in(page: str) -> list[dict]:
    """The decoded payloads of every Bokeh session token a page embeds."""
    return [get_token_payload(token) for token in re.findall(r'"token":\s*"([^"]+)"', page)]


def test_the_session_token_holds_no_cookie_of_the_request(live_explorer, demo):
    live = live_explorer()
    client, _ = _sign_in(live, demo["api_key"])
    secrets = {name: client.cookies[name] for name in (COOKIE, "_xsrf")}
    page = client.get(f"{live.base_url}/explorer/", headers={"Authorization": "Bearer not-for-the-page"})
    assert page.status_code == 200
    payloads = tokens_in(page.text)
    assert len(payloads) == 1
    shown = page.text + json.dumps(payloads)
    assert [name for name, value in secrets.items() if value in shown] == []
    assert "not-for-the-page" not in shown
    assert payloads[0]["cookies"] == {} and "Cookie" not in payloads[0]["headers"]
    # What the page knows of the sign-in is who it is, which opens nothing by itself.
    assert payloads[0][TOKEN_IDENTITY].split(" ")[0] == demo["buyer_id"]
    assert requests.get(f"{live.base_url}/explorer/", allow_redirects=False).status_code == 302


@pytest.mark.browser
def test_the_explorer_works_signed_in_without_cookies_in_its_page(chromium, live_explorer, demo):  # noqa: F811
    live = live_explorer()
    browser = chromium.new_context()
    try:
        page = browser.new_page()
        page.set_default_timeout(60_000)
        page.goto(f"{live.base_url}/explorer")
        page.fill("#api_key", demo["api_key"])
        page.click("button[type=submit]")
        page.locator(".lineups-table .tabulator-row").first.wait_for(state="visible")
        cookies = {c["name"]: c["value"] for c in browser.cookies()}
        assert {COOKIE, "_xsrf"} <= set(cookies)
        html = page.content()
        shown = html + json.dumps(tokens_in(html))
        assert [name for name in (COOKIE, "_xsrf") if cookies[name] in shown] == []
        assert page.evaluate("document.cookie").find(cookies[COOKIE]) == -1  # HttpOnly
    finally:
        browser.close()
