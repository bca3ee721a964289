"""`lineups serve` (contract C10, C11) as a real process: --demo on an empty store,
on a store that has the demo already, refused on other stores; clean stop on SIGTERM
and SIGINT. SQLite only: the command is the same on every back end."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests

from tests.waiting import PATIENCE_S

ROOT = Path(__file__).resolve().parents[2]
#: The console script's entry point (`python -m cli.main` would load cli.main twice).
LINEUPS = [sys.executable, "-c", "from cli.main import main; main()"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(db: Path, *args: str, port: int | None = None) -> tuple[subprocess.Popen, int, Path]:
    """`lineups serve` on `db` and `port` (default a free one; 0: the kernel picks)."""
    port = free_port() if port is None else port
    log = db.with_suffix(f".{port}.log")
    env = {**os.environ, "LINEUPS_DB": f"sqlite:///{db}"}
    for name in ("LINEUPS_SECRET", "LINEUPS_BASE_URL", "LINEUPS_DB_SCHEMA"):
        env.pop(name, None)
    process = subprocess.Popen(
        [*LINEUPS, "serve", "--port", str(port), *args],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log.open("wb"), text=True,
    )
    return process, port, log


def wait_until_up(port: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, "the server exited"
        try:
            if requests.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return
        except requests.RequestException:  # not listening yet, or still starting up
            time.sleep(0.1)
    pytest.fail("the server did not come up")


def stop(process: subprocess.Popen, signum: int = signal.SIGTERM) -> int:
    process.send_signal(signum)
    return process.wait(timeout=PATIENCE_S)


def test_serve_demo_then_again_then_refused(tmp_path):
    db = tmp_path / "lineups.db"
    process, port, log = start(db, "--demo", "--json")
    first = json.loads(process.stdout.readline())
    assert first["base_url"] == f"http://127.0.0.1:{port}"
    assert first["api_key"].startswith("lk_")
    wait_until_up(port, process)
    sources = requests.get(f"http://127.0.0.1:{port}/v1/sources", headers={"X-API-Key": first["api_key"]}, timeout=10)
    assert sources.status_code == 200 and len(sources.json()["sources"]) == 5
    page = requests.get(f"http://127.0.0.1:{port}/v1/lineups", headers={"X-API-Key": first["api_key"]}, timeout=30)
    assert page.status_code == 200 and len(page.json()["data"]) == 100
    # --demo built the demo buyer's merged views before serving (issue 15): the
    # merge=all view of its 5 feeds and the one merge=by_source view, which holds
    # every feed of the store (the demo has a sixth, which the buyer does not
    # read), so that the first page was read, not merged.
    with sqlite3.connect(db) as connection:
        views = connection.execute("SELECT mode, json_array_length(feeds) FROM merged_views WHERE state = 'ready'").fetchall()
    assert sorted(views) == [("all", 5), ("by_source", 6)]
    assert stop(process) == 0
    assert first["api_key"] not in log.read_text()
    assert "GET /v1/lineups 200" in log.read_text()

    # Again on the same store: the demo is there, so a fresh key for the demo buyer.
    process, port, log = start(db, "--demo", "--json")
    second = json.loads(process.stdout.readline())
    assert second["api_key"] != first["api_key"]
    wait_until_up(port, process)
    for key in (first["api_key"], second["api_key"]):
        response = requests.get(f"http://127.0.0.1:{port}/v1/sources", headers={"X-API-Key": key}, timeout=10)
        assert response.status_code == 200
    assert stop(process, signal.SIGINT) == 0
    assert "new key" in log.read_text()


def test_serve_on_port_0_prints_the_port_it_bound(tmp_path):
    process, _, _ = start(tmp_path / "any-port.db", "--json", port=0)
    said = json.loads(process.stdout.readline())
    base_url = urlsplit(said["base_url"])
    assert (base_url.scheme, base_url.hostname) == ("http", "127.0.0.1")
    assert base_url.port not in (None, 0), said
    wait_until_up(base_url.port, process)
    assert requests.get(f"{said['base_url']}/healthz", timeout=10).json() == {"status": "ok"}
    assert stop(process) == 0


def test_serve_demo_refuses_a_store_with_other_data(tmp_path):
    db = tmp_path / "other.db"
    env = {**os.environ, "LINEUPS_DB": f"sqlite:///{db}"}
    subprocess.run([*LINEUPS, "buyer", "add", "Someone"], cwd=ROOT, env=env, check=True,
                   capture_output=True)
    process, port, log = start(db, "--demo", "--json")
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 1
    assert json.loads(out)["error"]["code"] == "VALIDATION_ERROR"


def test_serve_without_demo_prints_where_to_look(tmp_path):
    db = tmp_path / "plain.db"
    process, port, log = start(db, "--base-url", "https://lineups.example.com/")
    wait_until_up(port, process)
    spec = requests.get(f"http://127.0.0.1:{port}/v1/openapi.json", timeout=10).json()
    assert spec["servers"] == [{"url": "https://lineups.example.com"}]
    assert stop(process) == 0
    out = process.stdout.read()
    assert "https://lineups.example.com/v1/sources" in out and "<API_KEY>" in out
