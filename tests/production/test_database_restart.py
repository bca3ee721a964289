"""PostgreSQL stops and starts again under `lineups serve --processes 2` while clients
keep asking (production issue): during the outage every answer is the contract's
JSON 500 body (C5), never a hang, a dropped connection or a traceback; no answer is
ever wrong; and the service recovers by itself within 10 s of the database accepting
connections.

This stops the machine's PostgreSQL for about two seconds, so it runs after every
other test (`outage`), and always starts the database again.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import threading
import time

import psycopg
import pytest
import requests

from tests.api.conftest import assert_error
from tests.conftest import need_service

OUTAGE_S = 2.0
#: After the database is back, how long the clients keep going.
AFTER_S = 4.0
PATHS = ["/v1/lineups?limit=500", "/v1/lineups?limit=500&format=csv&merge=by_source", "/v1/sources"]


@dataclasses.dataclass
class Outcome:
    path: str
    began: float
    seconds: float
    response: requests.Response | None = None
    failure: str | None = None


def cluster() -> list[str]:
    """The pg_ctlcluster command for the machine's cluster, or skip (fail in CI)."""
    binary = shutil.which("pg_ctlcluster")
    if binary is None or not os.path.isdir("/etc/postgresql") or os.geteuid() != 0:
        need_service("pg_ctlcluster (PostgreSQL restart)", RuntimeError("not available to this user"))
    (version,) = os.listdir("/etc/postgresql")
    return [binary, "--skip-systemctl-redirect", version, "main"]


def accepting(dsn: str) -> bool:
    try:
        psycopg.connect(dsn, connect_timeout=1).close()
        return True
    except psycopg.Error:
        return False


def clients(base_url: str, key: str, stop: threading.Event, outcomes: list[Outcome], count: int = 4) -> list[threading.Thread]:
    def ask(number: int) -> None:
        turn = number
        while not stop.is_set():
            path = PATHS[turn % len(PATHS)]
            turn += 1
            began = time.monotonic()
            outcome = Outcome(path, began, 0.0)
            try:
                outcome.response = requests.get(base_url + path, headers={"X-API-Key": key}, timeout=15)
            except requests.RequestException as exc:
                outcome.failure = repr(exc)
            outcome.seconds = time.monotonic() - began
            outcomes.append(outcome)
            time.sleep(0.01)

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    return threads


@pytest.mark.outage
@pytest.mark.parametrize("backend", ["postgresql"])
def test_postgresql_restart_under_load(tiny_store, served):
    command = cluster()
    dsn = "host=127.0.0.1 port=5432 user=postgres dbname=test"
    server = served(tiny_store["env"], processes=2)
    key = tiny_store["key"]
    known = {path: requests.get(server.base_url + path, headers={"X-API-Key": key}, timeout=30) for path in PATHS}
    assert all(r.status_code == 200 for r in known.values())

    outcomes: list[Outcome] = []
    stop = threading.Event()
    threads = clients(server.base_url, key, stop, outcomes)
    try:
        time.sleep(0.5)
        subprocess.run([*command, "stop"], check=True, capture_output=True, timeout=60)
        stopped = time.monotonic()
        time.sleep(OUTAGE_S)
    finally:
        subprocess.run([*command, "start"], capture_output=True, timeout=60)
        deadline = time.monotonic() + 30
        while not accepting(dsn) and time.monotonic() < deadline:
            time.sleep(0.05)
        ready = time.monotonic()
    try:
        assert accepting(dsn), "PostgreSQL did not start again"
        time.sleep(AFTER_S)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)

    failures = [o for o in outcomes if o.failure is not None]
    assert not failures, failures[:3]
    assert max(o.seconds for o in outcomes) < 12, "a request hung"
    errors = 0
    for outcome in outcomes:
        if outcome.response.status_code == 200:  # never a wrong answer
            assert outcome.response.content == known[outcome.path].content, outcome.path
        else:
            error = assert_error(outcome.response, 500, "INTERNAL_ERROR")
            assert outcome.response.headers["X-Request-Id"] in error["message"]
            errors += 1
    during = [o for o in outcomes if stopped <= o.began < ready]
    assert errors and during, "the clients never met the outage"

    # Recovered: every request that began after this moment was answered.
    failed_after_ready = [o.began for o in outcomes if o.response.status_code != 200 and o.began >= ready]
    recovered = max(failed_after_ready, default=ready)
    first_answer = min(o.began + o.seconds for o in outcomes if o.response.status_code == 200 and o.began >= ready)
    print(f"\noutage {ready - stopped:.2f} s, {len(outcomes)} requests, {errors} x 500; after PostgreSQL "
          f"accepted connections: last 500 {recovered - ready:.2f} s, first 200 {first_answer - ready:.2f} s")
    assert recovered - ready < 10
    assert any(o.began > recovered and o.response.status_code == 200 for o in outcomes)
    assert "Traceback" not in "".join(o.response.text for o in outcomes)
    assert server.stop() == 0
