"""What a client can hold, and what it gets for a request the server cannot read
(issue 16 items 3, 4, 9, 10; C5).

The server of `lineups serve` (`api.server.DrainingServer`) runs here on a free port
over this test's store: bodies are refused before they are read, half-open and idle
connections are closed, and requests Tornado cannot parse are answered with the
contract's JSON error body. Also: `limit` takes ASCII digits only, a badly encoded
share path is a bad token (401, counted), and keyed responses are never cached.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import time

import pytest

from api.app import make_app
from api.ratelimit import MemoryLimiter
from api.server import BODY_TIMEOUT_S, IDLE_TIMEOUT_S, MAX_BODY_BYTES, DrainingServer
from tests.api.conftest import LiveServer, assert_error


@pytest.fixture
def backend() -> str:
    """Connection handling does not depend on the store: SQLite only."""
    return "sqlite"


@pytest.fixture
def serve(fresh_tiny, sessions, store_settings):
    """`serve(**server_args)`: a `DrainingServer` over the hand-made data."""
    started = []

    def start(limit: int = 100_000, **server_args) -> LiveServer:
        def build(base_url: str):
            settings = dataclasses.replace(store_settings, base_url=base_url)
            return make_app(settings, sessions, limiter=MemoryLimiter(limit, 60))

        server = LiveServer(build, DrainingServer, **server_args)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
        server.app.settings["lineups_deps"].executor.shutdown(wait=True)


def connect(server: LiveServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    return sock


def answer(sock: socket.socket, timeout: float = 5.0) -> bytes:
    """Everything the server sends until it closes the connection (or `timeout`)."""
    sock.settimeout(timeout)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except socket.timeout:
        pass
    return data


def closed_within(sock: socket.socket, seconds: float) -> bool:
    """True when the server closes `sock` (having sent nothing more) within `seconds`."""
    sock.settimeout(seconds)
    try:
        return sock.recv(1024) == b""
    except socket.timeout:
        return False
    except ConnectionResetError:
        return True


def assert_json_400(raw: bytes) -> dict:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0] == "HTTP/1.1 400 Bad Request", raw[:200]
    headers = dict(line.split(": ", 1) for line in lines[1:])
    assert headers["Content-Type"].startswith("application/json")
    assert len(headers["X-Request-Id"]) == 32 and headers["Connection"] == "close"
    error = json.loads(body)["error"]
    assert set(error) == {"code", "message", "details"} and error["code"] == "VALIDATION_ERROR"
    assert headers["X-Request-Id"] in error["message"]
    return error


def test_the_server_has_connection_limits_by_default():
    server = DrainingServer(lambda request: None)
    assert server.conn_params.max_body_size == MAX_BODY_BYTES
    assert server.conn_params.header_timeout == IDLE_TIMEOUT_S  # headers must come within it
    assert server.conn_params.body_timeout == BODY_TIMEOUT_S
    assert server.max_buffer_size <= 1024 * 1024
    custom = DrainingServer(lambda request: None, idle_connection_timeout=1, max_body_size=10)
    assert custom.conn_params.header_timeout == 1 and custom.conn_params.max_body_size == 10


def test_a_large_body_is_refused_before_it_is_read(serve):
    server = serve()
    sock = connect(server)
    began = time.monotonic()
    # 95 MB announced, none sent: refused at once (it was read in full before: +282 MB for four).
    sock.sendall(b"POST /v1/lineups HTTP/1.1\r\nHost: x\r\nContent-Length: 95000000\r\n\r\n" + b"x" * 1000)
    assert_json_400(answer(sock))
    assert time.monotonic() - began < 5
    sock.close()


def test_half_open_and_idle_connections_are_closed(serve):
    server = serve(idle_connection_timeout=1.0, body_timeout=1.0)
    half_open = [connect(server) for _ in range(50)]
    for sock in half_open:
        sock.sendall(b"GET /v1/sources HTTP/1.1\r\nHost: x\r\nX-API-")  # headers never finished
    slow_body = connect(server)
    slow_body.sendall(b"POST /v1/sources HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
    idle = connect(server)
    idle.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert idle.recv(65536).startswith(b"HTTP/1.1 200")  # then nothing more: an idle keep-alive
    began = time.monotonic()
    assert all(closed_within(sock, 5) for sock in [*half_open, slow_body, idle])
    assert time.monotonic() - began < 5
    for sock in [*half_open, slow_body, idle]:
        sock.close()


@pytest.mark.parametrize("request_bytes", [
    b"GARBAGE\r\n\r\n",  # malformed request line
    b"GET /v1/sources HTTP/1.1\r\nHost: x\r\nX-API-Key: lk_" + b"a" * 31 + b"\x00\r\n\r\n",  # NUL in a header
    b"GET /v1/sources HTTP/1.1\r\nHost: x\r\nX-API-Key: lk_" + b"a" * 32 + b"\x7f\r\n\r\n",  # DEL
    b"GET /v1/sources HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n",
], ids=["request-line", "nul", "del", "no-colon"])
def test_requests_tornado_cannot_parse_get_the_json_error_body(serve, request_bytes):
    server = serve()
    sock = connect(server)
    sock.sendall(request_bytes)
    assert_json_400(answer(sock))
    sock.close()


def test_oversized_headers_close_the_connection_without_a_hang(serve):
    server = serve()
    sock = connect(server)
    sock.sendall(b"GET /v1/sources HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n")
    assert closed_within(sock, 5)
    sock.close()


def test_limit_takes_ascii_digits_only(fresh_tiny_api):
    tiny_api = fresh_tiny_api
    for value in ("\u0665", "\u0661\u0660", "\uff15", "5\u0660"):  # Arabic-Indic and full-width digits
        assert_error(tiny_api.get("/v1/lineups", params={"limit": value}), 400, "VALIDATION_ERROR", "limit")
    assert tiny_api.get("/v1/lineups", params={"limit": "5"}).status_code == 200


def test_a_badly_encoded_share_path_is_a_bad_token_and_counted(make_api, fresh_tiny):
    api = make_api(None, limiter=MemoryLimiter(2, 60))
    for _ in range(2):
        assert_error(api.get("/v1/share/%ff", key=None), 401, "UNAUTHORIZED")
    refused = api.get("/v1/share/%ff%fe.csv", key=None)
    assert_error(refused, 429, "RATE_LIMITED")
    assert 1 <= int(refused.headers["Retry-After"]) <= 60


def test_keyed_responses_are_private_and_not_stored(fresh_tiny_api, fresh_tiny):
    tiny_api, tiny = fresh_tiny_api, fresh_tiny
    for path in ("/v1/sources", "/v1/lineups?limit=2", "/v1/lineups?format=csv&limit=2", f"/v1/schema/{tiny['a']}"):
        response = tiny_api.get(path)
        assert response.status_code == 200, path
        assert response.headers["Cache-Control"] == "private, no-store", path
    for path, key in (("/v1/lineups?limit=0", "default"), ("/v1/sources", "lk_" + "0" * 32), ("/v1/sources", None)):
        assert tiny_api.get(path, key=key).headers["Cache-Control"] == "private, no-store", path
