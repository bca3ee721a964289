"""PostgreSQL stops and starts again under `lineups serve --processes 2` while clients
keep asking (production issue): during the outage every answer is the contract's
JSON 500 body (C5), never a hang, a dropped connection or a traceback; no answer is
ever wrong; and the service recovers by itself within 10 s of the database accepting
connections.

The database stopped is the test's own: a server made with initdb in a temporary
folder on a free port (`tests.production.replication.OwnPostgres`, as the replica
tests make theirs). A test suite never stops a service it did not start (issue 16
item 17): the machine's shared PostgreSQL is not touched.
"""

from __future__ import annotations

import dataclasses
import subprocess
import threading
import time

import psycopg
import pytest
import requests

from store.database.db import create_schema, make_engine, make_sessionmaker
from tests.api.conftest import assert_error
from tests.api.tiny_data import load_tiny
from tests.conftest import need_service
from tests.production.conftest import store_env
from tests.production.replication import OwnPostgres
from tests.waiting import until

OUTAGE_S = 2.0
#: The server has recovered when this many requests in a row that began after the
#: database was back were answered.
RECOVERED_IN_A_ROW = 8
PATHS = ["/v1/lineups?limit=500", "/v1/lineups?limit=500&format=csv&merge=by_source", "/v1/sources"]


@dataclasses.dataclass
class Outcome:
    path: str
    began: float
    seconds: float
    response: requests.Response | None = None
    failure: str | None = None


@pytest.fixture
def own_store():
    """A PostgreSQL server of this test's own with the hand-made data; yields the
    server (`OwnPostgres`) and the data's ids and keys, with `env` for `lineups`."""
    try:
        postgres = OwnPostgres()
    except FileNotFoundError as exc:
        need_service("initdb and pg_ctl (a PostgreSQL server of the test's own)", exc)
    try:
        try:
            postgres.start()
        except subprocess.SubprocessError as exc:
            need_service("initdb and pg_ctl (a PostgreSQL server of the test's own)", exc)
        engine = make_engine(postgres.url)
        create_schema(engine)
        tiny = load_tiny(make_sessionmaker(engine))
        engine.dispose()
        yield postgres, {**tiny, "env": store_env(postgres.url)}
    finally:
        postgres.remove()


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


def answered_since(outcomes: list[Outcome], moment: float, count: int) -> bool:
    """True when the latest `count` requests began after `moment` and were answered 200."""
    latest = outcomes[-count:]
    return len(latest) == count and all(
        o.began >= moment and o.response is not None and o.response.status_code == 200 for o in latest
    )


def test_postgresql_restart_under_load(own_store, served):
    postgres, tiny = own_store
    server = served(tiny["env"], "--per-process-limits", processes=2)
    key = tiny["key"]
    known = {path: requests.get(server.base_url + path, headers={"X-API-Key": key}, timeout=30) for path in PATHS}
    assert all(r.status_code == 200 for r in known.values())

    outcomes: list[Outcome] = []
    stop = threading.Event()
    threads = clients(server.base_url, key, stop, outcomes)
    try:
        assert until(lambda: len(outcomes) >= 4), "the clients never got an answer"
        postgres.stop()
        stopped = time.monotonic()
        time.sleep(OUTAGE_S)
    finally:
        if not postgres.running:
            postgres.start()
        until(lambda: accepting(postgres.dsn))
        ready = time.monotonic()
    try:
        assert accepting(postgres.dsn), "PostgreSQL did not start again"
        assert until(lambda: answered_since(outcomes, ready, RECOVERED_IN_A_ROW)), "the server never recovered"
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)

    failures = [o for o in outcomes if o.failure is not None]
    assert not failures, failures[:3]  # a request that hung is one: its client's timeout cut it off
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
    assert any(o.began > recovered and o.response.status_code == 200 for o in outcomes)
    assert "Traceback" not in "".join(o.response.text for o in outcomes)
    assert server.stop() == 0
