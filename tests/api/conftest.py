"""Fixtures of the API tests: a real server on a free port, over a real store.

A server runs the application (`api.app.make_app`) on 127.0.0.1 in a background
thread with its own event loop; an `Api` client (requests) is bound to it. Every test
runs on SQLite and on PostgreSQL. Two data sets: the demo loader's (800 records, fixed
seed and anchor date: `demo`, `demo_api`) and small hand-made feeds for exact
assertions (`tiny`, `tiny_api`). Both are built once per backend and shared by the
tests that only read; tests that change data take `fresh_tiny` / `fresh_tiny_api`
(or `make_api`), which build on the per-test `sessions` / `store_settings` fixtures
of tests/conftest.py.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import datetime as dt
import inspect
import threading
from typing import Any, Iterator

import pytest
import requests
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets

from store.database.db import transaction
from tests.api.tiny_data import load_tiny
from tests.waiting import PATIENCE_S

ANCHOR = dt.date(2024, 3, 1)
DEMO_RECORDS = 800
DEMO_SEED = 7
#: Tests make many requests with one key; only the rate-limit tests use the C5 limit.
TEST_RATE_LIMIT = 100_000


def assert_error(response: requests.Response, status: int, code: str, parameter: str | None = None) -> dict:
    """The response is the seed's error body (section 7) with this status and code;
    for a parameter error, `details` names the parameter and gives a reason (C5).
    Returns the `error` object."""
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"code", "message", "details"}, error
    assert error["code"] == code, error
    assert isinstance(error["message"], str) and error["message"], error
    assert "Traceback" not in response.text
    if parameter is not None:
        assert isinstance(error["details"], dict), error
        assert error["details"]["parameter"] == parameter, error
        assert isinstance(error["details"]["reason"], str) and error["details"]["reason"], error
    elif code != "VALIDATION_ERROR":
        assert error["details"] is None, error
    assert len(response.headers.get("X-Request-Id", "")) == 32
    return error


class LiveServer:
    """An application served on a free port from a background thread's event loop."""

    def __init__(self, make, server_class=HTTPServer, **server_args):
        self._server_class, self._server_args = server_class, server_args
        sockets = bind_sockets(0, "127.0.0.1")
        self.port = sockets[0].getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.app = make(self.base_url)
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(sockets,), daemon=True)
        self._thread.start()
        assert self._ready.wait(PATIENCE_S), "the API server did not start"

    def _run(self, sockets) -> None:
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        server = self.server = self._server_class(self.app, **self._server_args)
        server.add_sockets(sockets)
        self._ready.set()
        self.loop.run_forever()
        server.stop()
        self.loop.run_until_complete(server.close_all_connections())
        self.loop.close()

    def submit(self, fn, *args) -> concurrent.futures.Future:
        """Run `fn(*args)` on the server's loop (and await its result there when it is
        awaitable): a future of that result, to wait for from this thread."""

        async def run():
            result = fn(*args)
            return await result if inspect.isawaitable(result) else result

        return asyncio.run_coroutine_threadsafe(run(), self.loop)

    def call(self, fn, *args, timeout: float = 30):
        """`submit(fn, *args)` and wait for its result."""
        return self.submit(fn, *args).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(PATIENCE_S)


@dataclasses.dataclass
class Api:
    """A client of one live server with a default API key."""

    server: LiveServer
    key: str | None
    sessions: Any
    settings: Any
    http: requests.Session = dataclasses.field(default_factory=requests.Session)

    @property
    def base_url(self) -> str:
        return self.server.base_url

    @property
    def deps(self):
        return self.server.app.settings["lineups_deps"]

    def get(self, path: str, params: Any = None, key: Any = "default", **kwargs) -> requests.Response:
        """GET `path` with the default key (`key=None`: no key header)."""
        headers = dict(kwargs.pop("headers", {}))
        key = self.key if key == "default" else key
        if key is not None:
            headers["X-API-Key"] = key
        return self.http.get(self.base_url + path, params=params, headers=headers, timeout=30, **kwargs)

    def request(self, method: str, path: str, key: Any = "default", **kwargs) -> requests.Response:
        headers = dict(kwargs.pop("headers", {}))
        key = self.key if key == "default" else key
        if key is not None:
            headers["X-API-Key"] = key
        return self.http.request(method, self.base_url + path, headers=headers, timeout=30, **kwargs)

    def lineups(self, **params) -> dict:
        response = self.get("/v1/lineups", params=params)
        assert response.status_code == 200, response.text
        return response.json()


class Servers:
    """Live servers over one store, stopped together."""

    def __init__(self, sessions, settings):
        self.sessions = sessions
        self.settings = settings
        self.started: list[LiveServer] = []

    def __call__(self, key: str | None = None, *, limiter=None, sessions=None, **kwargs) -> Api:
        """A new server; `make_api(key, limiter=..., sessions=..., executor=...)`
        returns an `Api` with `key` as its default key."""
        from api.app import make_app
        from api.ratelimit import MemoryLimiter

        def build(base_url: str):
            return make_app(
                dataclasses.replace(self.settings, base_url=base_url),
                sessions or self.sessions,
                limiter=limiter or MemoryLimiter(TEST_RATE_LIMIT, 60),
                **kwargs,
            )

        server = LiveServer(build)
        self.started.append(server)
        return Api(server, key, self.sessions, self.settings)

    def stop(self) -> None:
        for server in self.started:
            server.stop()
            server.app.settings["lineups_deps"].executor.shutdown(wait=True)
            server.app.settings["lineups_deps"].usage.close()
        self.started.clear()


@dataclasses.dataclass
class Store:
    settings: Any
    sessions: Any


@contextlib.contextmanager
def open_store(backend: str, folder) -> Iterator[Store]:
    """A fresh, empty store on `backend` (tests/conftest.py's `fresh_store_settings`)
    with its schema in place, for fixtures wider than one test."""
    from store.database.db import create_schema, engine_for, make_sessionmaker
    from tests.conftest import fresh_store_settings

    with fresh_store_settings(backend, folder) as settings:
        engine = engine_for(settings)
        try:
            create_schema(engine)
            yield Store(settings, make_sessionmaker(engine))
        finally:
            engine.dispose()


@pytest.fixture
def make_api(sessions, store_settings):
    """Live servers over this test's own fresh store (for tests that change data)."""
    servers = Servers(sessions, store_settings)
    yield servers
    servers.stop()


# ---------------------------------------------------------------- shared, read-only stores
# Building a store costs about a second; tests that only read share one per backend.
@pytest.fixture(scope="package", params=["sqlite", "postgresql"])
def shared_backend(request) -> str:
    return request.param


@pytest.fixture(scope="package")
def demo_store(shared_backend, tmp_path_factory):
    """A store with the demo data set (800 records, seed 7, anchor 2024-03-01) and its
    payload `{"buyer_id", "api_key", "feeds", "records"}`. Read only."""
    from store.intake import demo as demo_data

    with open_store(shared_backend, tmp_path_factory.mktemp("demo")) as store:
        with transaction(store.sessions) as session:
            payload = demo_data.load_demo(session, DEMO_RECORDS, DEMO_SEED, ANCHOR)
        yield store, payload


@pytest.fixture(scope="package")
def demo_servers(demo_store):
    servers = Servers(demo_store[0].sessions, demo_store[0].settings)
    yield servers
    servers.stop()


@pytest.fixture
def demo(demo_store) -> dict:
    return demo_store[1]


@pytest.fixture(scope="package")
def _demo_api(demo_servers, demo_store) -> Api:
    return demo_servers(demo_store[1]["api_key"])


@pytest.fixture
def demo_api(_demo_api) -> Api:
    """A live server over the shared demo store, with the demo buyer's key."""
    return _demo_api


@pytest.fixture(scope="package")
def tiny_store(shared_backend, tmp_path_factory):
    """A store with the hand-made data (`load_tiny`) and its ids and keys. Read only:
    tests that change data use `fresh_tiny`."""
    with open_store(shared_backend, tmp_path_factory.mktemp("tiny")) as store:
        yield store, load_tiny(store.sessions)


@pytest.fixture(scope="package")
def tiny_servers(tiny_store):
    servers = Servers(tiny_store[0].sessions, tiny_store[0].settings)
    yield servers
    servers.stop()


@pytest.fixture(scope="package")
def _tiny_api(tiny_servers, tiny_store) -> Api:
    return tiny_servers(tiny_store[1]["key"])


@pytest.fixture
def tiny(tiny_store) -> dict:
    return tiny_store[1]


@pytest.fixture
def tiny_api(_tiny_api) -> Api:
    """A live server over the shared hand-made store, with Tiny Buyer's key."""
    return _tiny_api


@pytest.fixture
def make_tiny_api(tiny_store):
    """Extra servers (own limiter, service, …) over the shared hand-made store."""
    servers = Servers(tiny_store[0].sessions, tiny_store[0].settings)
    yield servers
    servers.stop()


@pytest.fixture
def fresh_tiny(sessions) -> dict:
    """The hand-made data in this test's own store, for tests that change it."""
    return load_tiny(sessions)


@pytest.fixture
def fresh_tiny_api(make_api, fresh_tiny) -> Api:
    return make_api(fresh_tiny["key"])
