"""Several server processes on one port (production issue): keep-alive connections
are spread over the workers, a killed worker is replaced while the others keep
serving, and an ingest made by the command line is seen by every worker's next query
(the merge caches are keyed on the store's feed versions, read on every request)."""

from __future__ import annotations

import csv
import http.client
import os
import signal

import pytest
import requests

from cli.listening import migrates_queued_connections, reuse_port_balances
from tests.api.conftest import Servers
from tests.api.tiny_data import TINY_ROWS_A
from tests.production.conftest import LISTEN, alive, lineups, tcp_sockets
from tests.waiting import PATIENCE_S, until

LINEUPS_QUERY = {"limit": 500}


def get(server, key: str, path: str = "/v1/lineups", params=LINEUPS_QUERY) -> requests.Response:
    """One request on a new connection (so the kernel picks the worker anew)."""
    return requests.get(server.base_url + path, params=params, headers={"X-API-Key": key}, timeout=30)


def until_every_worker_answered(server, key: str, expected: dict, tries: int = 400) -> None:
    """Request until each live worker has served at least one request of this call;
    every answer must be 200 with the `expected` body."""
    seen: set[int] = set()
    for _ in range(tries):
        response = get(server, key)
        assert response.status_code == 200, response.text
        assert response.json() == expected, f"worker {server.worker_of(response)} answered differently"
        seen.add(server.worker_of(response))
        if seen >= server.workers():
            return
    pytest.fail(f"only workers {seen} of {server.workers()} answered in {tries} requests")


#: Keep-alive connections in the spreading test. With a socket per worker the kernel
#: picks one for each new connection by a hash of its addresses and ports: all 16 on
#: one of two workers has a chance of 2 * 2**-16 = 2**-15.
CONNECTIONS = 16


@pytest.mark.skipif(not reuse_port_balances(), reason="needs SO_REUSEPORT on Linux (elsewhere the socket is shared)")
@pytest.mark.parametrize("backend", ["sqlite"])
def test_keep_alive_connections_are_spread_over_the_workers(tiny_store, served):
    """Clients that open their keep-alive connections while one worker is busy (here:
    stopped with SIGSTOP for a moment) still reach both workers. On one socket that
    every worker accepted on, the free worker took every such connection and kept it
    for good (`python -m bench scaling` measured 4 keep-alive connections
    give one worker 1,501 requests and the other none); with a socket per worker the
    busy worker's share waits in its own socket's queue until it is free."""
    server = served(tiny_store["env"], "--per-process-limits", processes=2)
    workers = server.workers()
    assert len(workers) == 2
    busy = min(workers)
    connections = [http.client.HTTPConnection("127.0.0.1", server.port, timeout=30) for _ in range(CONNECTIONS)]
    try:
        os.kill(busy, signal.SIGSTOP)
        try:
            for connection in connections:
                connection.connect()  # the kernel completes the handshake for a stopped worker too
            # What the free worker takes, it has taken: a listening socket's queue is empty.
            assert until(lambda: any(state == LISTEN and queued == 0
                                     for state, _, queued in tcp_sockets(server.port))), tcp_sockets(server.port)
        finally:
            os.kill(busy, signal.SIGCONT)
        served_by: list[list[int]] = [[] for _ in connections]
        for _ in range(3):
            for connection, pids in zip(connections, served_by):
                connection.request("GET", "/v1/sources", headers={"X-API-Key": tiny_store["key"]})
                response = connection.getresponse()
                body = response.read()
                assert response.status == 200, body
                pids.append(server.worker_of(response))
    finally:
        for connection in connections:
            connection.close()
    assert all(len(set(pids)) == 1 for pids in served_by), f"a connection was not kept alive: {served_by}"
    per_worker = {pid: sum(pids[0] == pid for pids in served_by) for pid in workers}
    assert all(per_worker.values()), f"connections per worker: {per_worker}"
    assert server.stop() == 0


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_killed_worker_is_replaced_while_the_others_serve(tiny_store, served):
    server = served(tiny_store["env"], "--per-process-limits", processes=2)
    key = tiny_store["key"]
    expected = get(server, key).json()
    first = server.workers()
    assert len(first) == 2
    victim = min(first)

    # With a socket per worker, a connection that the kernel queued on the victim's
    # socket before the dying victim's socket closed is reset, unless the kernel hands
    # it to the other worker (net.ipv4.tcp_migrate_req = 1; cli/listening.py). Never
    # once the victim is gone (the parent has reaped it: every thread has exited and
    # its socket is closed), and never a wrong answer.
    may_reset = reuse_port_balances() and not migrates_queued_connections()
    reaped = f"(pid {victim}) was killed by SIGKILL"
    for number in range(40):
        if number == 10:
            os.kill(victim, signal.SIGKILL)
        dying = number >= 10 and reaped not in server.log()
        try:
            response = get(server, key)
        except requests.ConnectionError:
            if not (may_reset and dying):
                raise
            continue
        assert response.status_code == 200 and response.json() == expected

    until(lambda: len(server.workers() - {victim}) == 2)
    workers = server.workers()
    assert victim not in workers and len(workers) == 2, workers
    assert f"(pid {victim}) was killed by SIGKILL; replacing it" in server.log()
    # The replacement serves too, with the same answers.
    until_every_worker_answered(server, key, expected)
    assert server.stop() == 0


def _ingest_file(path) -> None:
    """A feed file that changes feed A: A5's quantity, and a new call A6."""
    changed = {**TINY_ROWS_A[4], "quantity": "4321.5"}
    added = {"ref": "A6", "port_unlocode": "BRSSZ", "vessel_name": "Sea Breeze", "commodity": "Soybeans",
             "eta": "2024-03-12T00:00:00Z", "updated_at": "2024-02-25T00:00:00Z"}
    columns = list(dict.fromkeys([*changed, *added]))
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, columns)
        writer.writeheader()
        writer.writerows([changed, added])


def test_an_ingest_by_the_command_line_is_seen_by_every_workers_next_query(
    tiny_store, served, sessions, store_settings, tmp_path
):
    server = served(tiny_store["env"], "--per-process-limits", processes=2)
    key = tiny_store["key"]
    before = get(server, key).json()
    # Every worker has the old data in its caches...
    until_every_worker_answered(server, key, before)

    _ingest_file(tmp_path / "update.csv")
    done = lineups(tiny_store["env"], "ingest", "Alpha Santos Lineup", str(tmp_path / "update.csv"), "--json")
    assert done.returncode == 0, done.stderr
    # ...and the answer of a fresh cache over the changed store is what every one
    # of them serves from its next query on.
    fresh = Servers(sessions, store_settings)
    try:
        expected = fresh(key).lineups(**LINEUPS_QUERY)
    finally:
        fresh.stop()
    assert expected != before
    assert "Sea Breeze" in {row["vessel_name"] for row in expected["data"]}
    until_every_worker_answered(server, key, expected)
    assert server.stop() == 0


@pytest.mark.parametrize("backend", ["sqlite"])
def test_workers_stop_when_their_parent_is_killed_outright(tiny_store, served):
    server = served(tiny_store["env"], "--per-process-limits", processes=2)
    workers = server.workers()
    os.kill(server.pid, signal.SIGKILL)
    server.process.wait(PATIENCE_S)
    assert until(lambda: not any(alive(pid) for pid in workers)), "orphaned workers kept running"
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{server.base_url}/healthz", timeout=PATIENCE_S)
