"""The explorer's own defences (issue 9): its websocket opens only from the
explorer's own origin, its session cookie cannot be forged, it does not start
without a signing secret outside the embedded default, its logs hold no key or
token, and its CSV download neutralises formula cells.

The server is `lineups serve` (tests/production's `served`) with the public address
`https://lineups.test` behind an imagined proxy, so that both origins a browser may
send count: the public one and the listening address. What tests/explorer covers
already is not repeated: the cookie's flags over http and a cut signature
(test_login.py), an evil origin and a websocket without a cookie (test_login.py),
the download's exact text (test_csvfile.py).
"""

from __future__ import annotations

import asyncio
import csv
import io
import os
import re
import subprocess
import sys
import time

import pytest
import requests
from tornado.httpclient import HTTPClientError, HTTPRequest
from tornado.web import create_signed_value
from tornado.websocket import websocket_connect

from explorer.auth import COOKIE
from store.database.db import transaction
from tests.production.conftest import LINEUPS, ROOT, free_port, served, store_env, tiny_store  # noqa: F401 - fixtures
from tests.security.test_csv_injection import assert_cells_are_safe, expected_cells, injected  # noqa: F401
from tests.security.test_logs import secrets_in

PUBLIC = "https://lineups.test"


@pytest.fixture
def explorer_server(tiny_store, served):  # noqa: F811
    """`lineups serve` over the hand-made store, public address https://lineups.test."""
    return served({**tiny_store["env"], "LINEUPS_BASE_URL": PUBLIC}, explorer=True)


def sign_in(base_url: str, key: str) -> requests.Response:
    """The login form's answer (the cookie is Secure: the test carries it by hand)."""
    http = requests.Session()
    form = http.get(f"{base_url}/explorer/login", timeout=30)
    xsrf = re.search(r'name="_xsrf" value="([^"]+)"', form.text).group(1)
    return http.post(f"{base_url}/explorer/login", data={"_xsrf": xsrf, "api_key": key}, allow_redirects=False, timeout=30)


def page(base_url: str, cookie: str) -> requests.Response:
    return requests.get(f"{base_url}/explorer/", headers={"Cookie": f"{COOKIE}={cookie}"}, allow_redirects=False, timeout=60)


def connects(port: int, cookie: str, token: str, origin: str) -> bool:
    """True when the explorer's websocket accepts the handshake; False on 403."""

    async def attempt() -> None:
        request = HTTPRequest(f"ws://127.0.0.1:{port}/explorer/ws", headers={"Origin": origin, "Cookie": f"{COOKIE}={cookie}"})
        connection = await websocket_connect(request, subprotocols=["bokeh", token])
        connection.close()

    try:
        asyncio.run(attempt())
        return True
    except HTTPClientError as refused:
        assert refused.code == 403, refused
        return False


@pytest.mark.parametrize("backend", ["sqlite"])
def test_the_websocket_opens_only_from_the_explorers_own_origins(explorer_server, tiny_store):
    server, port = explorer_server, explorer_server.port
    cookie = sign_in(server.base_url, tiny_store["key"]).cookies[COOKIE]
    token = re.search(r'"token":\s*"([^"]+)"', page(server.base_url, cookie).text).group(1)

    accepted = [PUBLIC, f"{PUBLIC}:443", "HTTPS://Lineups.Test", f"http://localhost:{port}"]
    # Tornado counts an Origin whose host and port are the request's Host header as
    # same-origin before any check (the scheme is not compared: one port serves one
    # scheme); the client sends Host 127.0.0.1:PORT.
    same_host = [f"http://127.0.0.1:{port}", f"https://127.0.0.1:{port}"]
    refused = [
        "http://lineups.test", "https://lineups.test:8443", "https://lineups.test.evil.example",
        "https://evil-lineups.test", "https://lineups.test@evil.example", "https://evil.example/https://lineups.test",
        "https://lineups.test/explorer", f"http://127.0.0.1.evil.example:{port}", f"http://localhost.evil.example:{port}",
        f"http://evil-localhost:{port}", f"http://localhost:{port}.evil.example", f"https://localhost:{port}",
        f"http://127.0.0.2:{port}", "http://127.0.0.1", f"http://127.0.0.1:{port + 1}", f"http://localhost:{port + 1}",
        "null", "",
    ]
    assert {o: connects(port, cookie, token, o) for o in accepted + same_host} == dict.fromkeys(accepted + same_host, True)
    assert {o: connects(port, cookie, token, o) for o in refused} == dict.fromkeys(refused, False)
    assert server.log().count("Refused the explorer's websocket from origin") == len(refused)


@pytest.mark.parametrize("backend", ["sqlite"])
def test_the_session_cookie_is_signed_http_only_lax_and_secure_behind_https(explorer_server, tiny_store):
    server = explorer_server
    response = sign_in(server.base_url, tiny_store["key"])
    header = response.headers["Set-Cookie"]
    assert header.startswith(f"{COOKIE}=") and "Path=/explorer" in header
    assert {"HttpOnly", "SameSite=Lax", "Secure"} <= {part.strip() for part in header.split(";")}
    cookie = response.cookies[COOKIE]
    assert page(server.base_url, cookie).status_code == 200
    token = re.search(r'"token":\s*"([^"]+)"', page(server.base_url, cookie).text).group(1)

    forged = {
        "a flipped character": cookie[:-1] + ("0" if cookie[-1] != "0" else "1"),
        "signed with another secret": create_signed_value("another-secret", COOKIE, "x").decode(),
        "the ids, unsigned": _identity(cookie),
        "another cookie's signature": create_signed_value("test-secret-with-at-least-32-characters", "other_cookie", "x").decode(),
        "expired (8 days old)": create_signed_value(
            "test-secret-with-at-least-32-characters", COOKIE, _identity(cookie), clock=lambda: time.time() - 8 * 86400).decode(),
        "empty": "",
    }
    for what, value in forged.items():
        response = page(server.base_url, value)
        assert response.status_code == 302 and "/explorer/login" in response.headers["Location"], what
        assert not connects(server.port, value, token, PUBLIC), what
    # The real cookie, re-signed now with the server's secret, is accepted (the
    # forgeries above differ from it only in what the test changed).
    assert page(server.base_url, create_signed_value("test-secret-with-at-least-32-characters", COOKIE, _identity(cookie)).decode()).status_code == 200


def _identity(cookie: str) -> str:
    """The value a signed cookie carries (`buyer_id key_id`)."""
    from tornado.web import decode_signed_value

    return decode_signed_value("test-secret-with-at-least-32-characters", COOKIE, cookie.strip('"')).decode()


@pytest.mark.parametrize("secret", [None, " , "])
def test_no_explorer_without_a_signing_secret_outside_the_embedded_default(secret):
    """`lineups serve` (tests/production/test_startup.py: the variable unset) also
    refuses a blank one, and so does the explorer served alone."""
    env = store_env("postgresql+psycopg://lineups@127.0.0.1:1/lineups")
    if secret is None:
        del env["LINEUPS_SECRET"]
    else:
        env["LINEUPS_SECRET"] = secret
    served_together = subprocess.run([*LINEUPS, "serve", "--port", "0"], cwd=ROOT, env=env, capture_output=True,
                                     text=True, timeout=60)
    assert served_together.returncode == 1
    assert "LINEUPS_SECRET is not set" in served_together.stderr and "Traceback" not in served_together.stderr
    alone = subprocess.run([sys.executable, "-m", "explorer", "--port", str(free_port())], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=60)
    assert alone.returncode == 1 and "LINEUPS_SECRET is not set" in alone.stderr and "Traceback" not in alone.stderr


def test_the_explorer_download_neutralises_every_formula_cell(injected):  # noqa: F811
    """The records of test_csv_injection (every free-text field starting with each
    formula character, through the real ingest) through the explorer's download
    (the API's `/v1/download/{ticket}`, issue 49 item 5), both merge modes."""
    from explorer import auth
    from store.access import downloads

    api, _, rows = injected
    with transaction(api.sessions) as session:
        identity = auth.login(session, api.key)
    for merge in ("all", "by_source"):
        ticket = downloads.ticket_for(api.settings.signing_secrets(), identity.buyer_id, identity.key_id,
                                      identity.session_id, {"merge": [merge]})
        response = requests.get(f"{api.base_url}/v1/download/{ticket}", timeout=60)
        assert response.status_code == 200, response.text
        text = response.content
        assert text.startswith("\ufeff".encode())
        records = list(csv.DictReader(io.StringIO(text.decode("utf-8-sig"), newline="")))
        assert len(records) == len(api.get("/v1/lineups", params={"merge": merge, "limit": 500}).json()["data"])
        assert_cells_are_safe(records)
        assert expected_cells(rows) <= {cell for record in records for cell in record.values()}
        assert {r["source_name"] for r in records} == {"'+Injected Feed"}


# ---------------------------------------------------------------- logs
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
#: `lineups serve` with every logger at DEBUG (Bokeh's and Panel's included).
DEBUG_BOOT = (
    "import logging\n"
    "basic = logging.basicConfig\n"
    "logging.basicConfig = lambda **kw: basic(**{**kw, 'level': logging.DEBUG})\n"
    "from cli.main import main\n"
    "main()\n"
)


@pytest.mark.browser
@pytest.mark.parametrize("backend", ["sqlite"])
def test_no_key_or_token_in_the_explorer_logs(tiny_store, tmp_path):  # noqa: F811
    """Sign in, create a share link in the explorer, use it, sign out, in headless
    Chromium; the server's whole output at DEBUG holds no key, link token, session
    cookie or secret."""
    if not os.path.exists(CHROMIUM):
        from tests.conftest import need_service

        need_service("chromium", FileNotFoundError(CHROMIUM))
    from playwright.sync_api import expect, sync_playwright

    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    output = tmp_path / "serve.log"
    with output.open("wb") as sink:
        process = subprocess.Popen([sys.executable, "-c", DEBUG_BOOT, "serve", "--port", str(port)], cwd=ROOT,
                                   env=tiny_store["env"], stdout=sink, stderr=subprocess.STDOUT)
    try:
        _wait_for(f"{base_url}/explorer/login", process)  # the explorer is mounted after the API listens
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            context = browser.new_context()
            tab = context.new_page()
            tab.set_default_timeout(30_000)
            # The tiny store's calls are in 2024; a bare /explorer opens on upcoming calls.
            tab.goto(f"{base_url}/explorer?from=2024-01-01")
            tab.fill("#api_key", tiny_store["key"])
            tab.click("button[type=submit]")
            tab.locator(".lineups-table .tabulator-row").first.wait_for()
            cookie = next(c["value"] for c in context.cookies() if c["name"] == COOKIE)
            tab.get_by_text("Share links", exact=True).click()
            tab.locator(".create-link button").click()
            expect(tab.locator(".share-notice")).to_contain_text("Link created")
            url = tab.locator(".link-url input").first.input_value()
            tab.locator("a.logout").click()
            expect(tab).to_have_url(f"{base_url}/explorer/login?logged_out=1")
            browser.close()
        assert requests.get(url, timeout=30).status_code == 200
    finally:
        process.terminate()
        process.wait(30)
    text = output.read_text(errors="replace")
    assert "DEBUG" in text and "/explorer" in text  # the explorer did log, at DEBUG
    token = url.rsplit("/", 1)[1]
    assert secrets_in(text, [tiny_store["key"], token, cookie, "test-secret-with-at-least-32-characters"]) == []


def _wait_for(url: str, process: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if requests.get(url, timeout=5).status_code == 200:
                return
        except requests.RequestException:
            pass
        assert process.poll() is None, "the server exited"
        assert time.monotonic() < deadline, "the server did not come up"
        time.sleep(0.2)
