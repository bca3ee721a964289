"""SIGTERM drains `lineups serve --processes 2` (production issue): it stops taking
connections at once, closes idle keep-alive connections, finishes the requests in
flight — one held up in the database, one whose client is still sending — and then
exits 0.

The request held up in the database waits on a table lock that the test takes in
PostgreSQL: a real slow query, no test-only code in the server.
"""

from __future__ import annotations

import signal
import socket
import threading
import time

import pytest
import requests
from sqlalchemy import text

from tests.production.conftest import ESTABLISHED, tcp_sockets
from tests.waiting import PATIENCE_S, until


def raw_request(port: int, key: str, body_start: bytes, content_length: int) -> socket.socket:
    """A GET /v1/sources whose headers are sent whole and whose body is not."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(
        b"GET /v1/sources HTTP/1.1\r\nHost: test\r\nX-API-Key: " + key.encode()
        + b"\r\nContent-Length: " + str(content_length).encode() + b"\r\n\r\n" + body_start
    )
    return sock


def read_all(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def refuses_connections(port: int) -> bool:
    """True when a new connection is refused, or reset: a worker that closes its
    socket resets the connections the kernel had queued on it (cli/listening.py)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=PATIENCE_S).close()
    except (ConnectionRefusedError, ConnectionResetError):
        return True
    return False


def server_read_everything(server_port: int, sock: socket.socket) -> bool:
    """True when the server has read every byte this client socket sent it."""
    client_port = sock.getsockname()[1]
    return any(state == ESTABLISHED and remote == client_port and unread == 0
               for state, remote, unread in tcp_sockets(server_port))


@pytest.mark.parametrize("backend", ["postgresql"])
def test_sigterm_finishes_requests_in_flight_and_refuses_new_connections(tiny_store, served, engine, store_settings):
    server = served(tiny_store["env"], "--per-process-limits", processes=2)
    key = tiny_store["key"]
    url = f"{server.base_url}/v1/sources"
    expected = requests.get(url, headers={"X-API-Key": key}, timeout=10).json()

    idle = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    idle.sendall(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
    assert idle.recv(65536).startswith(b"HTTP/1.1 200")  # now an idle keep-alive connection

    lock = engine.connect()
    transaction = lock.begin()
    try:
        lock.execute(text("LOCK TABLE feeds IN ACCESS EXCLUSIVE MODE"))
        held_up: dict = {}
        thread = threading.Thread(
            target=lambda: held_up.update(response=requests.get(url, headers={"X-API-Key": key}, timeout=30))
        )
        thread.start()
        waiting = text("SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = CAST(:name AS regclass)")
        with engine.connect() as watch:
            assert until(lambda: watch.execute(waiting, {"name": f"{store_settings.db_schema}.feeds"}).scalar() > 0), \
                "the request never reached the locked table"
        uploading = raw_request(server.port, key, b"abc", 6)
        assert until(lambda: server_read_everything(server.port, uploading)), "the upload's headers never arrived"

        server.process.send_signal(signal.SIGTERM)
        stopped_at = time.monotonic()
        assert until(lambda: refuses_connections(server.port)), "new connections were still accepted"
        idle.settimeout(PATIENCE_S)
        assert idle.recv(65536) == b""  # the idle connection was closed
        assert server.process.poll() is None  # still finishing

        # The client goes on sending a while after the stop: a second, not a wait for
        # anything (the server's grace period is 10 s).
        time.sleep(max(0.0, stopped_at + 1.0 - time.monotonic()))
        uploading.sendall(b"def")  # its request reads the locked table too: both go on now
        transaction.commit()  # the held-up query goes on
    finally:
        if transaction.is_active:
            transaction.rollback()
        lock.close()

    thread.join(PATIENCE_S)
    assert held_up["response"].status_code == 200 and held_up["response"].json() == expected
    uploading.settimeout(PATIENCE_S)
    answer = read_all(uploading)
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    assert b"Connection: close" not in answer.split(b"\r\n\r\n")[0]  # its headers came before the stop
    assert server.process.wait(timeout=PATIENCE_S) == 0
    log = server.log()
    assert log.count("stopped") >= 2 and "Grace period" not in log
    assert "All workers have exited" in log
