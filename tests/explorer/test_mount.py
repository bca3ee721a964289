"""The explorer mounted in the API's application on one port, the way `lineups serve`
composes them: `/explorer` is the explorer, and every other path keeps the API's
handling, JSON 404 and 405 bodies included (C5)."""

from __future__ import annotations

import pytest
import requests

api_app = pytest.importorskip("api.app")


@pytest.fixture
def live(live_explorer, context):
    def host(explorer):
        return api_app.make_app(
            _settings(context), context.sessions, extra_routes=lambda deps: explorer.routes()
        )

    return live_explorer(host)


def _settings(context):
    """The API's settings for the same secrets and base URL (its store is `sessions`)."""
    from store.settings import Settings

    return Settings(db_url="sqlite://", secrets=context.secrets, base_url=context.base_url)


def test_the_api_keeps_its_errors(live):
    for path in ("/v1/nothing", "/nothing", "/explorerx"):
        response = requests.get(live.base_url + path)
        assert response.status_code == 404, path
        assert response.json()["error"]["code"] == "NOT_FOUND"
    refused = requests.post(f"{live.base_url}/v1/lineups")
    assert refused.status_code == 405 and refused.json()["error"]["code"] == "NOT_FOUND"


def test_the_api_and_the_explorer_answer_on_one_port(live, demo, sign_in):
    lineups = requests.get(f"{live.base_url}/v1/lineups", params={"limit": 2}, headers={"X-API-Key": demo["api_key"]})
    assert lineups.status_code == 200 and len(lineups.json()["data"]) == 2
    anonymous = requests.get(f"{live.base_url}/explorer", allow_redirects=False)
    assert anonymous.status_code == 302 and "/explorer/login" in anonymous.headers["Location"]
    client, response = sign_in(live, demo["api_key"])
    assert response.status_code == 302
    page = client.get(f"{live.base_url}/explorer/")
    assert page.status_code == 200 and "bokeh" in page.text.lower()
    assert requests.get(f"{live.base_url}/explorer/static/js/bokeh.min.js").status_code == 200


def test_a_link_made_in_the_explorer_serves_its_rows_until_revoked(live, account, demo, sign_in):
    from explorer.shares import SharesModel
    from explorer.state import LineupsModel

    lineups = LineupsModel(account)
    lineups.filters.param.update(port="BRSSZ", commodity=["Soybeans"])
    shares = SharesModel(account, lineups.filters)
    shares.param.trigger("create")
    path = "/v1/share/" + shares.url.rsplit("/v1/share/", 1)[1]
    served = requests.get(live.base_url + path)
    assert served.status_code == 200, served.text
    client, _ = sign_in(live, demo["api_key"])
    downloaded = client.get(live.base_url + lineups.download_path)
    assert served.content == downloaded.content  # the same rows, the same text
    shares.request_revoke(shares.created_id)
    shares.param.trigger("confirm_revoke")
    assert requests.get(live.base_url + path).status_code == 401


def test_the_api_answers_while_the_explorer_is_still_starting(context, demo):
    """`lineups serve` listens before it imports and warms the explorer (a second or
    two): the API answers at once, the explorer's pages say it is starting (503,
    Retry-After, a page that reloads itself), then serve the explorer."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from api.server import DrainingServer
    from cli.serve import make_server_app
    from tests.api.conftest import LiveServer

    gate, composed = threading.Event(), []
    executor = ThreadPoolExecutor(2)

    def make(base_url):
        served = make_server_app(_settings(context), context.sessions, executor)
        make_explorer = served.explorer._make
        served.explorer._make = lambda: (gate.wait(30), make_explorer())[1]  # a slow import
        composed.append(served)
        return served.app

    server = LiveServer(make, DrainingServer)
    try:
        mounting = server.submit(composed[0].explorer.mount_soon, server.server)
        assert requests.get(f"{server.base_url}/healthz", timeout=5).json() == {"status": "ok"}
        page = requests.get(f"{server.base_url}/v1/lineups", params={"limit": 1}, headers={"X-API-Key": demo["api_key"]}, timeout=5)
        assert page.status_code == 200 and len(page.json()["data"]) == 1
        starting = requests.get(f"{server.base_url}/explorer/login", timeout=5)
        assert starting.status_code == 503 and starting.headers["Retry-After"] == "1"
        assert "The explorer is starting" in starting.text and 'http-equiv="refresh"' in starting.text
        gate.set()
        mounting.result(60)
        login = requests.get(f"{server.base_url}/explorer/login", timeout=5)
        assert login.status_code == 200 and 'name="api_key"' in login.text
    finally:
        gate.set()
        server.call(composed[0].explorer.stop)
        server.stop()
        executor.shutdown(wait=True)


def test_a_new_process_builds_its_explorer_once_the_api_is_quiet_or_someone_opens_it(context, demo):
    """Building the explorer holds the interpreter lock for a second or two, and the
    API's pages would wait for it: while requests keep coming it is not begun; someone
    opening /explorer begins it at once, busy or not; a quiet server begins it by
    itself (`cli.explorer_mount.ExplorerMount`, `QUIET_S`)."""
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    from api.server import DrainingServer
    from cli.explorer_mount import QUIET_S
    from cli.serve import make_server_app
    from tests.api.conftest import LiveServer

    def busy(seconds: float, until: threading.Event | None = None) -> None:
        """Requests back to back, as a client under load asks them (/healthz: no
        rate limit to meet)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end and not (until and until.is_set()):
            assert requests.get(f"{server.base_url}/healthz", timeout=5).status_code == 200

    executor = ThreadPoolExecutor(2)
    servers = []

    def start() -> tuple:
        begun, composed = threading.Event(), []

        def make(base_url):
            served = make_server_app(_settings(context), context.sessions, executor)
            make_explorer = served.explorer._make
            served.explorer._make = lambda: (begun.set(), make_explorer())[1]
            composed.append(served)
            return served.app

        live = LiveServer(make, DrainingServer)
        servers.append((live, composed[0]))
        return live, composed[0], begun, live.submit(composed[0].explorer.mount_soon, live.server)

    try:
        # Busy: not begun for as long as requests keep coming; asked for: begun at once.
        server, served, begun, mounting = start()
        busy(8 * QUIET_S)
        assert not begun.is_set()
        assert requests.get(f"{server.base_url}/explorer/login", timeout=5).status_code == 503
        busy(10, until=begun)
        assert begun.is_set()
        mounting.result(60)
        assert requests.get(f"{server.base_url}/explorer/login", timeout=5).status_code == 200
        # Quiet: begun by itself.
        server, served, begun, mounting = start()
        assert begun.wait(10)
        mounting.result(60)
        assert requests.get(f"{server.base_url}/explorer/login", timeout=5).status_code == 200
    finally:
        for live, served in servers:
            live.call(served.explorer.stop)
            live.stop()
        executor.shutdown(wait=True)
