"""`lineups link create | list | revoke` and `lineups db upgrade | status` (C8, C11)."""

from __future__ import annotations

import re

import cli.database  # noqa: F401  (registers the commands on the group)
import cli.links  # noqa: F401
from tests.cli.test_cli import UUID, assert_error, run_json


def _demo_buyer() -> str:
    return run_json("buyer", "add", "Acme Trading")["id"]


def test_c11_link_create_prints_the_url_and_canonical_filters(cli_env, monkeypatch):
    monkeypatch.setenv("LINEUPS_BASE_URL", "https://lineups.example.com/")
    buyer = _demo_buyer()
    body = run_json("link", "create", "Acme Trading", "port=brssz&commodity=soybeans")
    assert set(body) == {"id", "url", "filters"}
    assert re.fullmatch(UUID, body["id"])
    assert re.fullmatch(r"https://lineups\.example\.com/v1/share/[\w.-]+", body["url"])
    assert body["filters"] == {"commodity": "Soybeans", "port": "BRSSZ"}
    flag = run_json("link", "create", buyer, "latest=true", "--base-url", "http://10.0.0.5:8000")
    assert flag["url"].startswith("http://10.0.0.5:8000/v1/share/") and flag["id"] != body["id"]


def test_c11_link_create_refuses_what_the_api_refuses(cli_env):
    _demo_buyer()
    for query, parameter in (("limit=5", "limit"), ("bogus=1", "bogus"), ("commodity=coall", "commodity"),
                             ("from=2024-02-01&to=2024-01-01", "from"), ("format=json", "format")):
        details = assert_error(run_json("link", "create", "Acme Trading", query, code=1), "VALIDATION_ERROR")
        assert details["parameter"] in (parameter, "to"), (query, details)
    assert_error(run_json("link", "create", "Nobody", "", code=1), "NOT_FOUND")


def test_c11_link_list_hides_tokens_unless_asked_and_revoke_stamps(cli_env):
    _demo_buyer()
    made = run_json("link", "create", "Acme Trading", "port=NLRTM")
    token = made["url"].rsplit("/", 1)[1]
    listed = run_json("link", "list", "Acme Trading")["links"]
    assert [(l["id"], l["filters"], l["use_count"], l["revoked_at"]) for l in listed] == [
        (made["id"], {"port": "NLRTM"}, 0, None)
    ]
    assert token not in str(listed) and "url" not in listed[0]
    shown = run_json("link", "list", "Acme Trading", "--show-tokens")["links"]
    assert shown[0]["url"].endswith(token)
    revoked = run_json("link", "revoke", made["id"])
    assert revoked["id"] == made["id"] and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", revoked["revoked_at"])
    assert run_json("link", "list", "Acme Trading")["links"][0]["revoked_at"] == revoked["revoked_at"]
    assert_error(run_json("link", "revoke", "0d5e0f1e-0000-4000-8000-000000000000", code=1), "NOT_FOUND")


def test_c11_db_status_and_upgrade(cli_env):
    empty = run_json("db", "status")
    assert empty["current"] is None and empty["up_to_date"] is False and empty["head"]
    assert run_json("db", "upgrade") == {"from": None, "to": empty["head"]}
    assert run_json("db", "status") == {"current": empty["head"], "head": empty["head"], "up_to_date": True}
    assert run_json("db", "upgrade") == {"from": empty["head"], "to": empty["head"]}  # idempotent


def test_c11_a_store_behind_is_refused_with_the_command_to_run_and_no_password(cli_env, monkeypatch):
    from sqlalchemy import text

    from store.db import engine_for
    from store.migrate import head_revision

    run_json("db", "upgrade")
    engine = engine_for(cli_env)
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '0001'"))
    engine.dispose()
    if cli_env.db_url.startswith("postgresql"):  # trust auth takes any password
        monkeypatch.setenv("LINEUPS_DB", cli_env.db_url.replace("postgres@", "postgres:hunter2@"))
    body = run_json("feed", "list", code=1)
    message = body["error"]["message"]
    assert "lineups db upgrade" in message and head_revision() in message
    assert "hunter2" not in message
    engine = engine_for(cli_env)
    with engine.begin() as connection:  # as if the operator had run the upgrade
        connection.execute(text(f"UPDATE alembic_version SET version_num = '{head_revision()}'"))
    engine.dispose()
    assert run_json("feed", "list") == {"feeds": []}
