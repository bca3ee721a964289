"""Sign-in over HTTP: the login and logout pages, the session cookie, the redirect of
unauthenticated requests, the re-check against the store, and the websocket's origin
check (issue 6, "Login"). A real server on a free port; requests as the client."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import sqlite3
import threading
import time

import pytest
import requests
from tornado.httpclient import HTTPClientError, HTTPRequest
from tornado.websocket import websocket_connect

from api.app import make_app
from explorer.app import origins_for
from explorer.auth import COOKIE, CookieCodec
from store.access import accounts
from store.database.db import transaction
from store.fields import utcnow
from store.settings import Settings, sqlite_path


@pytest.fixture
def live(live_explorer):
    return live_explorer()


def test_unauthenticated_requests_go_to_the_login_page(live):
    for path in ("/explorer", "/explorer/"):
        response = requests.get(live.base_url + path, allow_redirects=False)
        assert response.status_code == 302
        assert requests.compat.urljoin(live.base_url + path, response.headers["Location"]).startswith(
            f"{live.base_url}/explorer/login?next="
        )
    page = requests.get(live.base_url + "/explorer")
    assert page.url.startswith(f"{live.base_url}/explorer/login")
    assert 'name="api_key"' in page.text and 'type="password"' in page.text
    assert page.headers["Cache-Control"] == "no-store"


def test_login_sets_a_signed_http_only_session_cookie(live, demo, sign_in):
    client, response = sign_in(live, demo["api_key"])
    assert response.status_code == 302 and response.headers["Location"] == "/explorer/"
    header = response.headers["Set-Cookie"]
    assert header.startswith(f"{COOKIE}=")
    assert "HttpOnly" in header and "SameSite=Lax" in header and "Path=/explorer" in header
    assert demo["api_key"] not in header  # the key itself is never stored in the browser
    page = client.get(f"{live.base_url}/explorer/")
    assert page.status_code == 200 and page.url == f"{live.base_url}/explorer/"
    assert "bokeh" in page.text.lower()


def test_a_sign_in_does_not_wait_for_a_writer(live, demo, context, sessions, store_settings, sign_in):
    """Issue 16 item 1: while an ingest holds SQLite's write lock, signing in is
    answered at once (it used to write the key's `last_used_at` first: 30 s, then a
    failure); the key's use is written once the lock is free."""
    started = utcnow().replace(tzinfo=None, microsecond=0)
    writer = sqlite3.connect(sqlite_path(store_settings.db_url), timeout=1)
    writer.execute("BEGIN IMMEDIATE")  # holds the write lock, as an ingest does
    try:
        began = time.monotonic()
        _, response = sign_in(live, demo["api_key"])
        took = time.monotonic() - began
    finally:
        writer.rollback()
        writer.close()
    assert response.status_code == 302 and response.headers["Location"].startswith("/explorer")
    assert took < 5, f"the sign-in waited {took:.1f} s for the write lock"
    assert context.usage.flush(timeout=30)
    with sessions() as session:
        used = accounts.find_key(session, demo["api_key"]).last_used_at
    assert used is not None and used.replace(tzinfo=None) >= started


@pytest.mark.parametrize("key", ["lk_" + "0" * 32, "not-a-key", ""])
def test_a_wrong_key_is_refused(live, key, sign_in):
    client, response = sign_in(live, key)
    assert response.status_code == 401
    assert "That API key is not valid." in response.text
    assert COOKIE not in client.cookies


def test_a_suspended_buyer_cannot_sign_in(live, demo, sessions, sign_in):
    with transaction(sessions) as session:
        accounts.set_buyer_status(session, accounts.find_buyer(session, demo["buyer_id"]), "suspended")
    _, response = sign_in(live, demo["api_key"])
    assert response.status_code == 403 and "suspended" in response.text


def test_the_login_form_needs_its_xsrf_token(live, demo):
    response = requests.post(f"{live.base_url}/explorer/login", data={"api_key": demo["api_key"]}, allow_redirects=False)
    assert response.status_code == 403
    assert COOKIE not in response.headers.get("Set-Cookie", "")


@pytest.mark.parametrize("target", ["https://evil.example/explorer", "//evil.example/", "/v1/lineups"])
def test_login_never_redirects_away(live, demo, target, sign_in):
    _, response = sign_in(live, demo["api_key"], next_url=target)
    assert response.headers["Location"] == "/explorer/"


def test_an_altered_cookie_is_no_session(live, demo, sign_in):
    client, _ = sign_in(live, demo["api_key"])
    value = client.cookies[COOKIE]
    client.cookies.set(COOKIE, value[:-4] + "0000", path="/explorer")
    response = client.get(f"{live.base_url}/explorer/", allow_redirects=False)
    assert response.status_code == 302


def test_a_revoked_key_loses_the_session(live, demo, sessions, sign_in):
    client, _ = sign_in(live, demo["api_key"])
    assert client.get(f"{live.base_url}/explorer/", allow_redirects=False).status_code == 200
    with transaction(sessions) as session:
        accounts.revoke_key(session, accounts.find_key(session, demo["api_key"]))
    response = client.get(f"{live.base_url}/explorer/", allow_redirects=False)
    assert response.status_code == 302
    notice = client.get(f"{live.base_url}/explorer/login")
    assert "Your session has ended" in notice.text
    assert COOKIE not in client.cookies  # the login page cleared it


def test_logout_ends_the_session(live, demo, sign_in):
    client, _ = sign_in(live, demo["api_key"])
    response = client.get(f"{live.base_url}/explorer/logout", allow_redirects=False)
    assert response.status_code == 302 and response.headers["Location"] == "/explorer/login?logged_out=1"
    assert COOKIE not in client.cookies
    assert client.get(f"{live.base_url}/explorer/", allow_redirects=False).status_code == 302


def test_the_websocket_refuses_foreign_origins(live, demo, sign_in):
    client, _ = sign_in(live, demo["api_key"])
    page = client.get(f"{live.base_url}/explorer/").text
    token = re.search(r'"token":\s*"([^"]+)"', page).group(1)
    cookie = f"{COOKIE}={client.cookies[COOKIE]}"

    async def connect(origin: str, with_cookie: bool = True):
        headers = {"Origin": origin, **({"Cookie": cookie} if with_cookie else {})}
        request = HTTPRequest(f"ws://127.0.0.1:{live.port}/explorer/ws", headers=headers)
        connection = await websocket_connect(request, subprotocols=["bokeh", token])
        connection.close()

    asyncio.run(connect(live.base_url))
    with pytest.raises(HTTPClientError) as refused:
        asyncio.run(connect("http://evil.example"))
    assert refused.value.code == 403
    with pytest.raises(HTTPClientError) as anonymous:
        asyncio.run(connect(live.base_url, with_cookie=False))
    assert anonymous.value.code == 403


def test_origins_are_the_served_host():
    assert origins_for("https://lineups.example.com") == ["lineups.example.com:443"]
    assert origins_for("http://127.0.0.1:8000", "127.0.0.1", 8000) == ["127.0.0.1:8000", "localhost:8000"]
    assert origins_for("https://lineups.example.com", "0.0.0.0", 8000) == ["lineups.example.com:443"]


def test_unknown_explorer_paths_are_the_contracts_404(live):
    response = requests.get(f"{live.base_url}/explorer/nothing/here")
    assert response.status_code == 404
    assert response.json() == {"error": {"code": "NOT_FOUND", "message": "No such resource: /explorer/nothing/here", "details": None}}


def test_the_login_page_sends_a_signed_in_browser_to_the_app(live, demo, sign_in):
    client, _ = sign_in(live, demo["api_key"])
    response = client.get(f"{live.base_url}/explorer/login", allow_redirects=False)
    assert response.status_code == 302 and response.headers["Location"] == "/explorer/"
    assert COOKIE in client.cookies


def test_logout_ends_the_session_on_the_server(live, demo, sign_in):
    """Issue 17, item 5: a copy of the cookie taken before the logout opens nothing."""
    client, _ = sign_in(live, demo["api_key"])
    copied = dict(client.cookies)
    assert client.get(f"{live.base_url}/explorer/").status_code == 200
    client.get(f"{live.base_url}/explorer/logout")
    again = requests.get(f"{live.base_url}/explorer/", cookies=copied, allow_redirects=False)
    assert again.status_code == 302 and "/explorer/login" in again.headers["Location"]
    # A new sign-in is a new session, which opens the app.
    fresh, _ = sign_in(live, demo["api_key"])
    assert fresh.get(f"{live.base_url}/explorer/").status_code == 200


def test_an_ended_session_stops_every_action(context, identity):
    from explorer.session import Account, SessionLost

    account = Account.open(context, identity)
    with account.store():
        pass
    context.book.end(identity.session_id)
    with pytest.raises(SessionLost):
        with account.store():
            pass
    assert account.lost
    with pytest.raises(SessionLost):
        Account.open(context, identity)


def test_a_logout_holds_in_every_server_process_and_after_a_restart(context, identity):
    """The ended sign-in is kept in the store: another process's context (or the same
    server after a restart) over the same store refuses the cookie too."""
    from explorer.session import Account, SessionLost

    other_process = dataclasses.replace(context, book=None)  # its own book, over the same store
    Account.open(other_process, identity)
    context.book.end(identity.session_id)
    assert context.book.flush(timeout=60)  # written by the book's own thread
    with pytest.raises(SessionLost):
        Account.open(other_process, identity)
    assert not other_process.book.is_live(identity.session_id)


def test_a_logout_during_a_long_write_freezes_nothing(live_explorer, context, demo, store_settings, sign_in):
    """Issue 49 item 2: while another connection holds SQLite's write lock (an
    ingest), a logout answers its page and ends the session at once, and /healthz
    and the API's pages are answered meanwhile (the logout used to write on the event
    loop: every request of the process waited 30 s, the logout got a 500 and the
    session stayed valid). The ended sign-in reaches the store once the lock is free."""
    settings = Settings(db_url="sqlite://", secrets=context.secrets, base_url=context.base_url)
    live = live_explorer(lambda explorer: make_app(settings, context.sessions, extra_routes=lambda deps: explorer.routes()))
    client, _ = sign_in(live, demo["api_key"])
    copied = dict(client.cookies)
    key = {"X-API-Key": demo["api_key"]}
    assert client.get(f"{live.base_url}/explorer/").status_code == 200
    assert requests.get(f"{live.base_url}/v1/lineups", params={"limit": 5}, headers=key).status_code == 200

    writer = sqlite3.connect(sqlite_path(store_settings.db_url), timeout=1)
    writer.execute("BEGIN IMMEDIATE")  # holds the write lock, as an ingest does
    try:
        logout: dict = {}
        thread = threading.Thread(target=lambda: logout.update(
            response=client.get(f"{live.base_url}/explorer/logout", timeout=120)))
        thread.start()
        health, pages = [], []
        while thread.is_alive() or len(health) < 5:
            began = time.monotonic()
            answer = requests.get(f"{live.base_url}/healthz", timeout=120)
            health.append((answer.status_code, round(time.monotonic() - began, 2)))
            pages.append(requests.get(f"{live.base_url}/v1/lineups", params={"limit": 5}, headers=key, timeout=120).status_code)
        thread.join()
        assert [h for h in health if h[0] != 200 or h[1] >= 1.0] == [], health
        assert set(pages) == {200}, pages
        response = logout["response"]
        assert response.status_code == 200 and "You are signed out." in response.text
        assert COOKIE not in client.cookies
        # Refused at once, the lock still held: this process remembers the logout.
        again = requests.get(f"{live.base_url}/explorer/", cookies=copied, allow_redirects=False, timeout=120)
        assert again.status_code == 302 and "/explorer/login" in again.headers["Location"]
    finally:
        writer.rollback()
        writer.close()
    # Written once the lock is free: another process's book (no memory of its own) refuses it.
    assert context.book.flush(timeout=60)
    ended = CookieCodec(context.secrets).decode(copied[COOKIE]).session_id
    assert not dataclasses.replace(context, book=None).book.is_live(ended)
