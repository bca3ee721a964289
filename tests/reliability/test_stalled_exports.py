"""Stalled and abandoned downloads (issue 16 item 2, C8): a share-link client that
stops reading is cut off after `ExportLimits.stall_s`, one that goes away ends its
export quietly (INFO, status 499 in the access log, no ERROR traceback), and
concurrent exports are capped per link, per buyer and per process (429 RATE_LIMITED
with Retry-After beyond).

The sheets are the demo data set's whole result (30,000 records, about 7 MB of
CSV): more than the socket buffers hold, so a client that reads nothing really
holds its export open.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import socket
import time

import pytest

from api.exports import ExportLimits, ExportSlots
from store.access import accounts, downloads, links
from store.database.db import transaction
from store.errors import RateLimited
from store.database.schema import Buyer
from tests.api.conftest import assert_error, make_api  # noqa: F401 - fixture
from tests.waiting import PATIENCE_S, until

RECORDS = 30_000


@pytest.fixture
def sheet(sessions, store_settings):
    """`(buyer_id, [share path, ...])`: the demo data set and three links of its buyer."""
    from store.intake.demo import load_demo

    with transaction(sessions) as session:
        demo = load_demo(session, RECORDS, seed=7, anchor=dt.date(2026, 11, 23))
        buyer = session.get(Buyer, demo["buyer_id"])
        tokens = [links.create_link(session, buyer, {}, store_settings.signing_secrets())[1] for _ in range(3)]
    return demo["buyer_id"], [f"/v1/share/{token}" for token in tokens]


def stalled_client(base_url: str, path: str) -> socket.socket:
    """A connection that asks for `path`, reads the first bytes, and then reads no more
    (a small receive buffer, so the server's writes back up at once)."""
    host, port = base_url.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    sock.settimeout(PATIENCE_S)  # the first request builds the buyer's view: long on a busy machine
    assert sock.recv(1024).startswith(b"HTTP/1.1 200")
    return sock


def read_to_end(sock: socket.socket, timeout: float) -> tuple[bytes, bool]:
    """What is left on the connection, and whether the server closed it within
    `timeout` seconds."""
    sock.settimeout(timeout)
    data, deadline = b"", time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(1 << 20)
        except socket.timeout:
            return data, False
        if not chunk:
            return data, True
        data += chunk
    return data, False


def aborts(caplog) -> tuple[list, list, list]:
    """(INFO abort lines, access-log lines with status 499, ERROR lines)."""
    records = caplog.records
    ended = [r for r in records if r.name == "lineups.api" and "ended after" in r.getMessage()]
    access = [r for r in records if r.name == "lineups.access" and " 499 " in r.getMessage()]
    errors = [r for r in records if r.levelno >= logging.ERROR]
    return ended, access, errors


def test_a_client_that_stops_reading_is_cut_off(make_api, sheet, caplog):
    api = make_api(None, export_limits=ExportLimits(stall_s=1.0))
    _, paths = sheet
    with caplog.at_level(logging.INFO):
        sock = stalled_client(api.base_url, paths[0])
        try:
            assert until(lambda: aborts(caplog)[0]), "the stalled export was never cut off"
            rest, closed = read_to_end(sock, timeout=PATIENCE_S)
        finally:
            sock.close()
        assert until(lambda: aborts(caplog)[1])
    assert closed and not rest.endswith(b"0\r\n\r\n"), "the server waited for the client to the end"
    ended, access, errors = aborts(caplog)
    assert "read nothing for 1 s" in ended[0].getMessage() and ended[0].levelno == logging.INFO
    assert access[0].levelno == logging.INFO and not errors
    assert api.deps.export_slots.streaming == 0  # its slot is free again


def test_a_client_that_goes_away_is_an_abort_not_an_error(make_api, sheet, caplog):
    api = make_api(None)
    _, paths = sheet
    with caplog.at_level(logging.INFO):
        stalled_client(api.base_url, paths[0]).close()
        assert until(lambda: aborts(caplog)[1]), "no access-log line with status 499"
    ended, access, errors = aborts(caplog)
    assert "went away" in ended[0].getMessage() and ended[0].levelno == logging.INFO
    assert not errors and "Traceback" not in caplog.text
    assert api.deps.export_slots.streaming == 0


def test_one_export_too_many_of_a_link_or_buyer_is_429_with_retry_after(make_api, sheet):
    api = make_api(None, export_limits=ExportLimits(per_link=1, per_buyer=2, stall_s=30, retry_after_s=7))
    _, paths = sheet
    held = [stalled_client(api.base_url, paths[0])]
    try:
        response = api.get(paths[0], key=None)  # the link's second export
        assert_error(response, 429, "RATE_LIMITED")
        assert response.headers["Retry-After"] == "7"
        held.append(stalled_client(api.base_url, paths[1]))  # the buyer's second: admitted
        response = api.get(paths[2], key=None)  # the buyer's third
        assert_error(response, 429, "RATE_LIMITED")
        assert "account" in response.json()["error"]["message"]
        assert api.request("HEAD", paths[0], key=None).status_code == 200  # HEAD streams nothing
    finally:
        for sock in held:
            sock.close()
    assert until(lambda: api.deps.export_slots.streaming == 0)
    assert api.get(paths[0], key=None).status_code == 200


def test_export_slots_count_per_link_buyer_and_process():
    slots = ExportSlots(ExportLimits(per_link=1, per_buyer=2, per_process=3, reserved=0))
    with slots.taken("l1", "b1"), slots.taken("l2", "b1"):
        with pytest.raises(RateLimited, match="this link"):
            with slots.taken("l1", "b2"):
                pass
        with pytest.raises(RateLimited, match="this account"):
            with slots.taken("l3", "b1"):
                pass
        with slots.taken("l3", "b2"):
            with pytest.raises(RateLimited, match="the server") as refused:
                with slots.taken("l4", "b3"):
                    pass
            assert refused.value.retry_after == ExportLimits().retry_after_s
    assert slots.streaming == 0
    with slots.taken("l1", "b1"):
        assert slots.streaming == 1


def test_the_last_slots_of_the_process_are_kept_for_buyers_with_none_running():
    """Issue 49 item 6: three buyers' 16 stalled exports took every slot of the
    process, and every other buyer's links answered 429. A buyer's further exports
    may not take the last `reserved` slots: a buyer with none running still gets one."""
    slots = ExportSlots(ExportLimits(per_link=3, per_buyer=6, per_process=16, reserved=4))
    with contextlib.ExitStack() as held:
        for n in range(12):  # buyers a, b: six each, over links of three exports
            held.enter_context(slots.taken(f"link-{n // 3}", "ab"[n // 6]))
        with pytest.raises(RateLimited, match="the server"):
            held.enter_context(slots.taken("link-c1", "c"))
            held.enter_context(slots.taken("link-c2", "c"))  # c's second: not in the reserve
        for buyer in ("d", "e", "f"):  # buyers with none running: one each, from the reserve
            held.enter_context(slots.taken(f"link-{buyer}", buyer))
        assert slots.streaming == 16
        with pytest.raises(RateLimited, match="the server"):
            held.enter_context(slots.taken("link-g", "g"))  # the process is full
    assert slots.streaming == 0


def download_tickets(api, sessions, buyer_id: str, sign_ins: int) -> list[str]:
    """Download tickets of the explorer for `sign_ins` sign-ins of the buyer, each
    for the whole result (`store.access.downloads`, what /explorer/download makes)."""
    with transaction(sessions) as session:
        _, row = accounts.create_key(session, session.get(Buyer, buyer_id))
        key_id = row.id
    secrets = api.settings.signing_secrets()
    return [downloads.ticket_for(secrets, buyer_id, key_id, f"sign-in-{n}", {}) for n in range(sign_ins)]


def test_explorer_downloads_take_the_same_export_slots(make_api, sheet, sessions):
    """Issue 49 item 5: the explorer's "Download CSV (all rows)" is the API's
    streamed download (`/v1/download/{ticket}`), not a document built in memory and
    sent over the websocket: a sign-in's downloads take the export slots share links
    take (per sign-in, per buyer, per process: 429 beyond)."""
    api = make_api(None, export_limits=ExportLimits(per_link=1, per_buyer=2, stall_s=30, retry_after_s=7))
    buyer_id, paths = sheet
    first, second = download_tickets(api, sessions, buyer_id, 2)
    held = [stalled_client(api.base_url, f"/v1/download/{first}")]
    try:
        assert api.deps.export_slots.streaming == 1
        assert_error(api.get(f"/v1/download/{first}", key=None), 429, "RATE_LIMITED")  # the sign-in's second
        held.append(stalled_client(api.base_url, paths[0]))  # the buyer's second export: a link's
        refused = api.get(f"/v1/download/{second}", key=None)  # the buyer's third
        assert_error(refused, 429, "RATE_LIMITED")
        assert "account" in refused.json()["error"]["message"] and refused.headers["Retry-After"] == "7"
    finally:
        for sock in held:
            sock.close()
    assert until(lambda: api.deps.export_slots.streaming == 0)
    assert api.get(f"/v1/download/{first}", key=None).status_code == 200


def test_an_explorer_download_nobody_reads_is_cut_off(make_api, sheet, sessions, caplog):
    api = make_api(None, export_limits=ExportLimits(stall_s=1.0))
    buyer_id, _ = sheet
    (ticket,) = download_tickets(api, sessions, buyer_id, 1)
    with caplog.at_level(logging.INFO):
        sock = stalled_client(api.base_url, f"/v1/download/{ticket}")
        try:
            assert until(lambda: aborts(caplog)[0], timeout=30), "the stalled download was never cut off"
        finally:
            sock.close()
    assert "read nothing for 1 s" in aborts(caplog)[0][0].getMessage() and not aborts(caplog)[2]
    assert until(lambda: api.deps.export_slots.streaming == 0)  # its memory and its slot freed
