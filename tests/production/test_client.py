"""The Python client (`client`, issue 46) against real `lineups serve` processes: it
waits out a low rate limit, rides over a server restarted in the middle of a download
and a 503, raises the contract's error for a 500 or a 4xx, and `lineups sync` keeps a
SQLite file equal to a full download across changes."""

from __future__ import annotations

import http.server
import json
import sqlite3
import threading
import time

import pandas as pd
import pytest
import requests

from client import ApiError, Client, Retry
from store.database.db import transaction
from store.database.schema import Feed
from tests.api.tiny_data import add_records
from tests.production.conftest import free_port, lineups, store_env


def download(base_url: str, key: str, **params) -> dict:
    """Every row of /v1/lineups, by id, read without the client."""
    rows, params = {}, {"limit": 500, **params}
    while True:
        body = requests.get(f"{base_url}/v1/lineups", params=params, headers={"X-API-Key": key}, timeout=30).json()
        rows.update((row["id"], row) for row in body["data"])
        if body["next_cursor"] is None:
            return rows
        params["cursor"] = body["next_cursor"]


def test_the_client_waits_out_a_low_rate_limit_and_gets_every_row(tiny_store, served):
    open_server = served(tiny_store["env"])
    limited = served({**tiny_store["env"], "LINEUPS_RATE_LIMIT": "3"})
    waits: list[float] = []
    api = Client(limited.base_url, tiny_store["key"], sleep=lambda s: (waits.append(s), time.sleep(s)))
    frame = api.lineups(limit=1)
    expected = download(open_server.base_url, tiny_store["key"])
    assert sorted(frame["id"]) == sorted(expected) and len(expected) > 3
    assert waits and all(1 <= wait <= 60 for wait in waits)  # Retry-After, honoured
    assert isinstance(frame["eta"].dtype, pd.DatetimeTZDtype) and str(frame["eta"].dtype.tz) == "UTC"
    assert frame["quantity"].dtype == float and str(frame["dwt"].dtype) == "Int64"
    assert list(frame.columns)[:3] == ["id", "source_id", "source_name"]


def test_a_download_goes_on_across_a_server_restart(tiny_store, served):
    port = free_port()
    server = served(tiny_store["env"], port=port)
    api = Client(server.base_url, tiny_store["key"], retry=Retry(attempts=60, backoff_s=0.2, max_backoff_s=1.0))
    pages = api.pages(limit=1)
    first = next(pages)
    server.stop()
    restarted = served(tiny_store["env"], port=port, wait=False)
    rest = list(pages)  # dropped connections tried again until the new server answers
    restarted.wait_until_serving()
    got = sorted([*first["id"], *(i for page in rest for i in page["id"])])
    assert got == sorted(download(restarted.base_url, tiny_store["key"]))


class Injecting(http.server.ThreadingHTTPServer):
    """A proxy in front of a real server that answers the next requests with the
    statuses queued in `inject` (a 503 or 500 body as the service writes it), and
    forwards the others."""

    def __init__(self, target: str):
        self.target, self.inject, self.seen = target, [], 0

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(handler):  # noqa: N802
                self.seen += 1
                if self.inject:
                    status = self.inject.pop(0)
                    body = json.dumps({"error": {"code": "INTERNAL_ERROR", "message": "injected", "details": None}}).encode()
                    handler.send_response(status)
                    handler.send_header("X-Request-Id", "f" * 32)
                else:
                    answer = requests.get(self.target + handler.path, headers={"X-API-Key": handler.headers["X-API-Key"]}, timeout=30)
                    body = answer.content
                    handler.send_response(answer.status_code)
                    handler.send_header("X-Request-Id", answer.headers["X-Request-Id"])
                handler.send_header("Content-Type", "application/json")
                handler.send_header("Content-Length", str(len(body)))
                handler.end_headers()
                handler.wfile.write(body)

            def log_message(handler, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.server_address[1]}"


def test_a_503_is_tried_again_and_a_500_or_a_4xx_raises_the_contracts_error(tiny_store, served):
    server = served(tiny_store["env"])
    proxy = Injecting(server.base_url)
    try:
        api = Client(proxy.base_url, tiny_store["key"], retry=Retry(backoff_s=0.01))
        proxy.inject = [503, 503]
        assert len(api.lineups()) == len(download(server.base_url, tiny_store["key"]))
        proxy.inject = [500]
        seen = proxy.seen
        with pytest.raises(ApiError) as raised:
            api.lineups()
        assert (raised.value.status, raised.value.code, raised.value.request_id) == (500, "INTERNAL_ERROR", "f" * 32)
        assert proxy.seen == seen + 1  # never tried again
        with pytest.raises(ApiError) as raised:
            api.lineups(port="nowhere")
        error = raised.value
        assert (error.status, error.code, error.details["parameter"]) == (400, "VALIDATION_ERROR", "port")
        assert len(error.request_id) == 32
    finally:
        proxy.shutdown()


def test_lineups_sync_keeps_a_file_equal_to_a_full_download(tiny_store, served, sessions, tmp_path):
    server = served(tiny_store["env"])
    path = tmp_path / "lineups.sqlite"
    env = {**tiny_store["env"], "LINEUPS_API_KEY": tiny_store["key"]}

    def synced(query: str = "") -> dict:
        done = lineups(env, "sync", "--url", server.base_url, "--to", str(path), "--json", *([query] if query else []))
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        with sqlite3.connect(path) as connection:
            connection.row_factory = sqlite3.Row
            rows = {row["id"]: dict(row) for row in connection.execute("SELECT * FROM lineups")}
        assert report["rows"] == len(rows)
        return rows

    assert synced() == download(server.base_url, tiny_store["key"])
    with transaction(sessions) as session:
        add_records(session, session.get(Feed, tiny_store["a"]), [
            {"ref": "A9", "port_unlocode": "BRSSZ", "vessel_name": "New Ship", "commodity": "wheat", "eta": "2024-03-20T00:00:00Z"},
        ])
    assert synced() == download(server.base_url, tiny_store["key"])
    assert synced("latest=true") == download(server.base_url, tiny_store["key"], latest="true")  # other filters: over
    refused = lineups(env, "sync", "--url", server.base_url, "--to", str(path), "--json", "port=nowhere")
    assert refused.returncode == 1 and json.loads(refused.stdout)["error"]["code"] == "VALIDATION_ERROR"
