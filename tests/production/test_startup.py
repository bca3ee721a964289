"""`lineups serve` refuses a configuration that cannot work, with a message that says
what to do, exit status 1 and no traceback (C11, production issue)."""

from __future__ import annotations

import json
import socket

import requests

from store.database.db import engine_for
from store.database.migrate import current_revision, head_revision, scripts, upgrade
from tests.production.conftest import lineups, store_env


def test_postgresql_without_a_secret_is_a_start_up_error():
    env = store_env("postgresql+psycopg://lineups@127.0.0.1:1/lineups")
    del env["LINEUPS_SECRET"]
    refused = lineups(env, "serve", "--port", "0")
    assert refused.returncode == 1
    assert "LINEUPS_SECRET is not set" in refused.stderr
    assert "Traceback" not in refused.stderr + refused.stdout

    as_json = lineups(env, "serve", "--port", "0", "--json")
    assert as_json.returncode == 1
    error = json.loads(as_json.stdout)["error"]
    assert "LINEUPS_SECRET" in error["message"]


def test_a_store_whose_schema_is_behind_is_refused_until_upgraded(store_settings, served):
    oldest = list(scripts().walk_revisions())[-1].revision
    assert oldest != head_revision(), "needs a second migration to be behind"
    engine = engine_for(store_settings)
    upgrade(engine, oldest)
    env = store_env(store_settings.db_url, store_settings.db_schema)

    refused = lineups(env, "serve", "--port", "0")
    assert refused.returncode == 1
    assert f"at revision {oldest}" in refused.stderr
    assert "Run: lineups db upgrade" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert current_revision(engine) == oldest  # serving never upgrades on its own

    assert lineups(env, "db", "upgrade").returncode == 0
    assert current_revision(engine) == head_revision()
    engine.dispose()
    server = served(env)
    assert requests.get(f"{server.base_url}/healthz", timeout=30).json() == {"status": "ok"}


def test_a_port_in_use_is_a_start_up_error(tmp_path):
    env = store_env(f"sqlite:///{tmp_path / 'l.db'}")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        refused = lineups(env, "serve", "--port", str(taken.getsockname()[1]))
    assert refused.returncode == 1
    assert "Cannot listen on 127.0.0.1" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_several_processes_without_redis_are_refused_unless_meant(tmp_path, served):
    """Issue 16 item 6 (C5: the count is shared): each process would count alone."""
    env = store_env(f"sqlite:///{tmp_path / 'l.db'}", LINEUPS_RATE_LIMIT="100")
    refused = lineups(env, "serve", "--port", "0", "--processes", "3", "--json")
    assert refused.returncode == 1
    error = json.loads(refused.stdout)["error"]
    assert error["code"] == "VALIDATION_ERROR" and error["details"]["parameter"] == "processes"
    assert "--redis" in error["message"] and "300 requests a minute" in error["message"]
    assert "--per-process-limits" in error["message"]
    assert "Traceback" not in refused.stderr

    server = served(env, "--per-process-limits", processes=2)
    assert requests.get(f"{server.base_url}/healthz", timeout=30).status_code == 200
    warning = [line for line in server.log().splitlines() if "--per-process-limits" in line]
    assert warning and " WARNING " in warning[0] and "200 requests a minute" in warning[0]
