"""Nothing secret in logs (C8; issue 9): no API key, no share-link token and no
signing secret in any log line.

In process: every record of the `lineups*` and `tornado*` loggers, at DEBUG, for
requests that carry keys and tokens every way a client might send them (header,
query string, path), bad ones too, and for forced 500s (a store function made to
raise) on the API and on a share link. Out of process: the whole stdout and stderr
of `lineups serve`, with a forced 500 too; the demo key it prints on purpose at
start-up (C11) must appear there and nowhere else.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
import requests
from tornado.netutil import bind_sockets

from store.access import accounts, links
from store.database.db import engine_for, make_sessionmaker, transaction
from store.database.schema import Buyer
from tests.api.conftest import assert_error

LOGGERS = ("lineups", "tornado")
#: A line of the server's log (cli/serve.py: time, level, logger, message).
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [A-Z]+ ")


def make_token(api, buyer_id: str) -> str:
    with transaction(api.sessions) as session:
        _, token = links.create_link(session, session.get(Buyer, buyer_id), {}, api.settings.signing_secrets())
    return token


def secrets_in(text: str, secrets: list[str]) -> list[str]:
    """The secrets, or 16-character pieces of them, that `text` contains."""
    pieces = {s[i:i + 16] for s in secrets for i in range(0, max(len(s) - 15, 1), 4)}
    return sorted(p for p in pieces if p in text)


def requests_that_carry_secrets(api, key: str, token: str) -> None:
    """Every way a key or token may reach the server, good and bad."""
    bad_key = "lk_" + "f" * 32
    for k in (key, bad_key, key.upper(), key + "x"):
        api.get("/v1/sources", key=k)
        api.get("/v1/lineups", params={"limit": 1}, key=k)
    api.get("/v1/sources", params={"api_key": key}, key=None)  # key in the query string
    api.get("/v1/lineups", params={"commodity": key})  # echoed by the error message
    api.get("/v1/lineups", params={"port_name": key, "country": token})
    api.get("/v1/lineups", params={"cursor": token})
    api.get(f"/v1/lineups/{key}/provenance")  # key and token in paths
    api.get(f"/v1/lineups/{token}/provenance")
    api.get(f"/v1/schema/{key}")
    api.get(f"/v1/{key}", key=None)
    api.request("POST", f"/v1/share/{token}", key=key)
    api.get(f"/v1/share/{token}", key=None)
    api.get(f"/v1/share/{token}.csv", params={"refresh": key}, key=None)
    api.get(f"/v1/share/{token[:-3]}xyz", key=None)
    api.get("/v1/sources", key=None, headers={"Authorization": f"Bearer {key}", "Cookie": f"key={key}", "Referer": f"/v1/share/{token}"})


class HttpClient:
    """A client of any server with the `get`/`request` of tests/api's `Api`, for
    `requests_that_carry_secrets`."""

    def __init__(self, base_url: str, key: str):
        self.base_url, self.key, self.http = base_url, key, requests.Session()

    def get(self, path, params=None, key="default", headers=None):
        return self.request("GET", path, key=key, params=params, headers=headers)

    def request(self, method, path, key="default", headers=None, **kwargs):
        headers = dict(headers or {})
        if key is not None:
            headers["X-API-Key"] = self.key if key == "default" else key
        return self.http.request(method, self.base_url + path, headers=headers, timeout=30, **kwargs)


def test_no_key_or_token_in_any_log_record(fresh_tiny_api, fresh_tiny, caplog, monkeypatch):
    api = fresh_tiny_api
    token = make_token(api, fresh_tiny["buyer_id"])
    secrets = [fresh_tiny["key"], token, *api.settings.signing_secrets()]
    with caplog.at_level(logging.DEBUG):
        requests_that_carry_secrets(api, fresh_tiny["key"], token)
        # Forced 500s: the store fails under the API and under a share link.
        def fail(*args, **kwargs):
            raise RuntimeError("the store failed (forced by the test)")

        monkeypatch.setattr(api.deps.lineups, "page", fail)
        monkeypatch.setattr(api.deps.lineups, "count", fail)
        failed = api.get("/v1/lineups", params={"commodity": "coal", "port_name": fresh_tiny["key"]})
        error = assert_error(failed, 500, "INTERNAL_ERROR")
        assert_error(api.get(f"/v1/share/{token}", key=None), 500, "INTERNAL_ERROR")
    records = [r for r in caplog.records if r.name.startswith(LOGGERS)]
    assert any(r.name == "lineups.access" for r in records), "the access log wrote nothing"
    request_id = failed.headers["X-Request-Id"]
    assert request_id in error["message"]
    assert any(request_id in r.getMessage() and r.exc_info for r in records), "the 500 was not logged with its traceback"
    text = "\n".join(logging.Formatter().format(r) for r in records)  # messages and tracebacks
    assert "RuntimeError: the store failed" in text
    assert secrets_in(text, secrets) == []


@pytest.fixture
def serve_process(cli_env, tmp_path):
    """`lineups serve --demo` on a free port as a subprocess, with
    `Lineups.page` made to fail when a request names the commodity "Urea"
    (a forced 500). Yields (base URL, the process, its output file)."""
    sockets = bind_sockets(0, "127.0.0.1")
    port = sockets[0].getsockname()[1]
    for s in sockets:
        s.close()
    boot = (
        "import store.views.lineups as lineups\n"
        "page = lineups.Lineups.page\n"
        "def forced(self, buyer_id, query, *args, **kwargs):\n"
        "    if 'Urea' in query.commodity:\n"
        "        raise RuntimeError('the store failed (forced by the test)')\n"
        "    return page(self, buyer_id, query, *args, **kwargs)\n"
        "lineups.Lineups.page = forced\n"
        "from cli.main import main\n"
        "main()\n"
    )
    output = tmp_path / "serve.log"
    with output.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-c", boot, "serve", "--demo", "--port", str(port)],
            stdout=sink, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:  # the port is bound before the app answers, and the explorer after the API
            try:
                if requests.get(f"{base_url}/explorer/login", timeout=5).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert process.poll() is None, output.read_text()
            assert time.monotonic() < deadline, "lineups serve did not come up"
            time.sleep(0.2)
        yield base_url, process, output
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:  # pragma: no cover - a hung server
                process.kill()
                process.wait()


def test_lineups_serve_writes_no_key_or_token(serve_process, cli_env):
    base_url, process, output = serve_process
    settings = cli_env
    engine = engine_for(settings)
    try:
        sessions = make_sessionmaker(engine)
        with transaction(sessions) as session:
            buyer = accounts.find_buyer(session, "Demo Buyer")
            key, _ = accounts.create_key(session, buyer)
            _, token = links.create_link(session, buyer, {"port": ["BRSSZ"]}, settings.signing_secrets())
    finally:
        engine.dispose()

    client = HttpClient(base_url, key)
    assert client.get("/v1/sources").status_code == 200
    assert client.get(f"/v1/share/{token}", key=None).status_code == 200
    requests_that_carry_secrets(client, key, token)
    demo_key = next(line.split()[4] for line in output.read_text().splitlines() if line.startswith("Demo buyer API key: lk_"))
    requests_that_carry_secrets(client, demo_key, token)
    failed = client.get("/v1/lineups", params={"commodity": "Urea", "port_name": key})
    assert_error(failed, 500, "INTERNAL_ERROR")
    process.send_signal(signal.SIGTERM)
    process.wait(15)

    text = output.read_text()
    assert failed.headers["X-Request-Id"] in text and "RuntimeError: the store failed" in text
    assert "GET /v1/share/<token> 200" in text  # the access log did run
    assert secrets_in(text, [key, token, *settings.signing_secrets()]) == []
    # The demo key is printed on purpose in the start-up banner (C11: its key and
    # commands to try), and used above: it appears in the banner and nowhere else.
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("Demo buyer API key: lk_"))
    end = first + next(i for i, line in enumerate(lines[first:]) if LOG_LINE.match(line))
    demo_key = lines[first].split()[4]
    assert [i for i, line in enumerate(lines) if demo_key in line and not first <= i < end] == []


def raw_request(base_url: str, data: bytes) -> bytes:
    """Send `data` as it is on a new connection; what comes back within 5 s."""
    host, port = base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(data)
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
                if b"\r\n\r\n" in answer and not answer.startswith(b"HTTP/1.1 200"):
                    break
        except socket.timeout:
            pass
        return answer


def issue_16_attacks(base_url: str, key: str, token: str) -> None:
    """Each way issue 16 found a key or token reaching a log, and its other attacks."""
    host = base_url.removeprefix("http://").encode()
    for tail in (b"\x00", b"\x7f", b"\r", b"\x01"):  # control characters, a lone CR of a CRLF file
        raw_request(base_url, b"GET /v1/sources HTTP/1.1\r\nHost: " + host + b"\r\nX-API-Key: " + key.encode() + tail + b"\r\n\r\n")
    raw_request(base_url, b"GET /v1/sources HTTP/1.1\r\nHost: " + key.encode() + b"\r\n\r\n")
    raw_request(base_url, f"GET /v1/sources {key}\r\n\r\n".encode())  # the key as the HTTP version
    raw_request(base_url, f"GET /v1/sources?api_key={key} HTTP/1.1\r\nHost: x\r\nX-Token: {token}\x00\r\n\r\n".encode())
    raw_request(base_url, f"POST /v1/lineups?api_key={key} HTTP/1.1\r\nHost: x\r\nContent-Length: 95000000\r\n\r\n".encode())
    http = requests.Session()
    for path in (  # the explorer's routes, keys and tokens in their query strings
        f"/explorer/login?api_key={key}&next=/explorer/%3Fkey%3D{key}",
        f"/explorer?api_key={key}", f"/explorer/?token={token}", f"/explorer/nope?key={key}",
        f"/explorer/logout?key={key}",
    ):
        http.get(base_url + path, timeout=10, allow_redirects=False)
    http.post(f"{base_url}/explorer/login?key={key}", data={"api_key": key}, timeout=10)  # no XSRF: 403
    http.get(f"{base_url}/v1/share/%ff{token}", timeout=10)
    http.get(f"{base_url}/v1/share/{token}%ff", timeout=10)
    http.get(f"{base_url}/v1/lineups", params={"limit": "\u0665", "api_key": key}, headers={"X-API-Key": key}, timeout=10)


def test_lineups_serve_logs_no_key_or_token_under_issue_16s_attacks(serve_process, cli_env):
    base_url, process, output = serve_process
    engine = engine_for(cli_env)
    try:
        with transaction(make_sessionmaker(engine)) as session:
            buyer = accounts.find_buyer(session, "Demo Buyer")
            key, _ = accounts.create_key(session, buyer)
            _, token = links.create_link(session, buyer, {}, cli_env.signing_secrets())
    finally:
        engine.dispose()
    issue_16_attacks(base_url, key, token)
    process.send_signal(signal.SIGTERM)
    process.wait(15)

    text = output.read_text(errors="replace")
    assert "Malformed HTTP message" in text and "/explorer/login" in text  # the attacks were logged
    assert secrets_in(text, [key, token]) == [], [line for line in text.splitlines() if key[3:19] in line][:3]


def test_every_log_line_and_traceback_goes_through_the_redaction():
    from api.redaction import RedactingFilter

    key, token = "lk_" + "ab" * 16, "sl_eyJsIjoiMSJ9.AbCdEfGhIjKlMnOpQrStUvWxYz0"
    record = logging.LogRecord("tornado.general", logging.INFO, __file__, 1, "Invalid header value %r", (key + "\x00",), None)
    assert RedactingFilter().filter(record) and key not in logging.Formatter().format(record)
    cut_short = logging.LogRecord("tornado.general", logging.INFO, __file__, 1, "GET %s", (token[:20],), None)
    assert RedactingFilter().filter(cut_short) and token[3:19] not in logging.Formatter().format(cut_short)
    try:
        raise ValueError(f"bad {token} in /v1/share/{token}")
    except ValueError:
        import sys as _sys

        failed = logging.LogRecord("lineups.api", logging.ERROR, __file__, 1, "failed", (), _sys.exc_info())
    RedactingFilter().filter(failed)
    formatted = logging.Formatter().format(failed)
    assert "ValueError: bad <token>" in formatted and token not in formatted


def websocket_handshake(base_url: str, headers: dict[str, bytes]) -> bytes:
    """A raw websocket handshake to the explorer with `headers` as given (bytes)."""
    host = base_url.removeprefix("http://").encode()
    lines = [b"GET /explorer/ws HTTP/1.1", b"Host: " + host, b"Upgrade: websocket", b"Connection: Upgrade",
             b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", b"Sec-WebSocket-Version: 13", b"Origin: " + b"http://" + host]
    lines += [name.encode() + b": " + value for name, value in headers.items()]
    return raw_request(base_url, b"\r\n".join(lines) + b"\r\n\r\n")


def issue_49_attacks(base_url: str, key: str, cookie: str, bokeh_token: str) -> None:
    """Each way issue 49 found a key, cookie or session token logged whole: a control
    character before or after a header's value (a key, a prefix-less key, the
    explorer's cookie), and the websocket's subprotocol token, well-formed or not."""
    host = base_url.removeprefix("http://").encode()

    def get(path: bytes, header: bytes) -> None:
        raw_request(base_url, b"GET " + path + b" HTTP/1.1\r\nHost: " + host + b"\r\n" + header + b"\r\n\r\n")

    for value in (b"\x1b" + key.encode(), key[3:].encode() + b"\x00", key.encode() + b"\x1b", key[3:].encode() + b"\x01"):
        get(b"/v1/sources", b"X-API-Key: " + value)
    for tail in (b"\x01", b"\x00", b"\x7f"):
        get(b"/explorer/", b"Cookie: lineups_explorer=" + cookie.encode() + tail)
    get(b"/explorer/", b"X-Bokeh-Token: \x1b" + bokeh_token.encode())
    session = f"lineups_explorer={cookie}".encode()
    for protocol in (bokeh_token, bokeh_token + "x", bokeh_token.replace(".", ""), "x" + bokeh_token, bokeh_token[:40]):
        websocket_handshake(base_url, {"Cookie": session, "Sec-WebSocket-Protocol": f"bokeh, {protocol}".encode()})
        websocket_handshake(base_url, {"Sec-WebSocket-Protocol": f"bokeh, {protocol}".encode()})
    websocket_handshake(base_url, {"Cookie": session, "Sec-WebSocket-Protocol": b"bokeh, " + bokeh_token.encode() + b"\x01"})


def test_lineups_serve_logs_header_names_never_their_values(serve_process, cli_env):
    """Issue 49 item 4: malformed headers are logged by name, never by value (a key
    after a control character, a key without `lk_`, the explorer cookie and the
    websocket's session token were logged whole)."""
    base_url, process, output = serve_process
    engine = engine_for(cli_env)
    try:
        with transaction(make_sessionmaker(engine)) as session:
            key, _ = accounts.create_key(session, accounts.find_buyer(session, "Demo Buyer"))
    finally:
        engine.dispose()
    http = requests.Session()
    form = http.get(f"{base_url}/explorer/login", timeout=30)
    xsrf = re.search(r'name="_xsrf" value="([^"]+)"', form.text).group(1)
    http.post(f"{base_url}/explorer/login", data={"_xsrf": xsrf, "api_key": key}, timeout=30)
    cookie = http.cookies["lineups_explorer"]
    bokeh_token = re.search(r'"token":\s*"([^"]+)"', http.get(f"{base_url}/explorer/", timeout=60).text).group(1)
    issue_49_attacks(base_url, key, cookie, bokeh_token)
    process.send_signal(signal.SIGTERM)
    process.wait(15)

    text = output.read_text(errors="replace")
    assert "Malformed HTTP message" in text  # the attacks were logged
    leaked = secrets_in(text, [key, key[3:], cookie, bokeh_token])
    assert leaked == [], [line[:300] for line in text.splitlines() if any(piece in line for piece in leaked)][:8]
    for name in ("X-Api-Key", "Cookie", "Sec-Websocket-Protocol"):  # by the header's name
        assert f"Malformed HTTP message from 127.0.0.1: Invalid header value ({name})" in text, name
