"""Fixtures of the explorer tests: a store filled by the demo loader, the explorer's
shared context over it, and a signed-in account.

The explorer runs the same store functions as the API, which the store and API tests
cover on both back ends; these tests drive the explorer's own logic and run on
SQLite only, to keep the suite quick. `live_explorer` serves the explorer on a free
port (alone, or inside another application, as `lineups serve` mounts it) and
`sign_in` submits its login form like a browser.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import re
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
import requests
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets
from tornado.web import Application

from explorer.app import ExplorerApp, origins_for

from store.database.db import transaction
from tests.waiting import PATIENCE_S

#: The demo's calls are placed around today, as `lineups serve --demo` places them: the
#: explorer opens on calls from today on, so a fixed day would empty it as time passes.
ANCHOR = dt.datetime.now(dt.timezone.utc).date()
DEMO_RECORDS = 800
DEMO_SEED = 7
BASE_URL = "http://explorer.test"


@pytest.fixture
def backend() -> str:
    """Explorer tests run on SQLite only (overrides the two-backend fixture)."""
    return "sqlite"


@pytest.fixture(scope="session")
def demo_template(tmp_path_factory) -> tuple[Path, dict[str, Any]]:
    """The demo data set (800 records, fixed seed and anchor) loaded once per test
    process into a SQLite file of its own: (the file, the loader's payload). Tests
    never use it: `demo` copies it into each test's fresh store."""
    from store.database.db import create_schema, engine_for, make_sessionmaker
    from store.intake.demo import load_demo
    from store.settings import Settings

    folder = tmp_path_factory.mktemp("explorer-demo")
    engine = engine_for(Settings(db_url=f"sqlite:///{folder / 'lineups.db'}", secrets=("test-secret-with-at-least-32-characters",)))
    try:
        create_schema(engine)
        with transaction(make_sessionmaker(engine)) as session:
            payload = load_demo(session, DEMO_RECORDS, seed=DEMO_SEED, anchor=ANCHOR)
    finally:
        engine.dispose()  # the last connection closed: the WAL is checkpointed into the file
    return folder / "lineups.db", payload


@pytest.fixture
def demo(engine, demo_template) -> dict[str, Any]:
    """The demo data set (800 records, fixed seed and anchor) in the fresh store:
    `{"buyer_id", "api_key", "feeds", "records"}`. The store is this test's own, as
    before; its content is a copy (SQLite's backup) of the same data set loaded once
    per process (`demo_template`), a third of a second less per test."""
    template, payload = demo_template
    raw = engine.raw_connection()
    try:
        with sqlite3.connect(template) as source:
            source.backup(raw.driver_connection)
    finally:
        raw.close()
    return copy.deepcopy(payload)


@pytest.fixture
def context(sessions, demo):
    """What every explorer session of one process shares, over the demo store."""
    from explorer.session import ExplorerContext
    from store.views.lineups import Lineups

    return ExplorerContext(sessions, Lineups(sessions), ("test-secret-with-at-least-32-characters",), BASE_URL)


@pytest.fixture
def identity(sessions, demo):
    """The demo buyer signed in with the demo key."""
    from explorer import auth

    with transaction(sessions) as session:
        return auth.login(session, demo["api_key"])


@pytest.fixture
def account(context, identity):
    from explorer.session import Account

    return Account.open(context, identity)


class LiveExplorer:
    """The explorer application served from a background thread's event loop, alone
    or inside the application `host(explorer)` makes."""

    def __init__(self, context, host=None):
        sockets = bind_sockets(0, "127.0.0.1")
        self.port = sockets[0].getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.explorer = ExplorerApp(context, websocket_origins=origins_for(self.base_url, "127.0.0.1", self.port))
        self.host = host or (lambda explorer: Application(explorer.routes()))
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(sockets,), daemon=True)
        self._thread.start()
        assert self._ready.wait(PATIENCE_S)

    def _run(self, sockets) -> None:
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        self.server = HTTPServer(self.host(self.explorer))
        self.server.add_sockets(sockets)
        self.explorer.start()
        self.loop.call_soon(self._ready.set)
        self.loop.run_forever()

    def stop(self) -> None:
        def shutdown():
            self.server.stop()
            self.explorer.stop()
            self.loop.stop()

        self.loop.call_soon_threadsafe(shutdown)
        self._thread.join(PATIENCE_S)


@pytest.fixture
def live_explorer(context):
    """Starts the explorer on a free port: `live_explorer()` alone, or
    `live_explorer(host)` inside the application `host(explorer)` makes."""
    servers = []

    def start(host=None):
        server = LiveExplorer(context, host)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def sign_in():
    """`sign_in(live, key, next_url=None)`: a browser-like client (requests) that
    submitted the login form; returns it and the form's response."""
    return _sign_in


def _sign_in(live, key: str, next_url: str | None = None) -> tuple[requests.Session, requests.Response]:
    client = requests.Session()
    form = client.get(f"{live.base_url}/explorer/login")
    xsrf = re.search(r'name="_xsrf" value="([^"]+)"', form.text).group(1)
    url = f"{live.base_url}/explorer/login" + (f"?next={next_url}" if next_url else "")
    response = client.post(url, data={"_xsrf": xsrf, "api_key": key}, allow_redirects=False)
    return client, response
