"""`lineups link create | list | revoke` and `lineups db upgrade | status` (C8, C11)."""

from __future__ import annotations

import re
import sqlite3

from tests.cli.test_cli import UUID, assert_error, invoke, run_json


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
    pages = {"sqlite_page_bytes": 8192} if cli_env.db_url.startswith("sqlite") else {}
    assert run_json("db", "status") == {"current": empty["head"], "head": empty["head"], "up_to_date": True, **pages,
                                        "views": []}  # issue 47: the kept views (none yet)
    assert run_json("db", "upgrade") == {"from": empty["head"], "to": empty["head"]}  # idempotent


def test_db_status_tells_of_a_sqlite_store_with_4_kib_pages_and_how_to_convert_it(tmp_path, monkeypatch):
    """A store made before 2026-11-29 keeps SQLite's 4 KiB pages; `db status` says so
    and where the conversion is written, and says nothing of pages once converted."""
    path = tmp_path / "older.db"
    made = sqlite3.connect(path)
    made.execute("PRAGMA page_size=4096")
    made.execute("CREATE TABLE made_before (x)")  # the page size is fixed by the first write
    made.close()
    monkeypatch.setenv("LINEUPS_DB", f"sqlite:///{path}")
    monkeypatch.setenv("LINEUPS_SECRET", "test-secret-with-at-least-32-characters")
    run_json("db", "upgrade")
    assert run_json("db", "status")["sqlite_page_bytes"] == 4096
    said = invoke("db", "status").stdout
    assert "SQLite pages of 4,096 bytes" in said and "docs/deploying.md" in said

    converted = sqlite3.connect(path, isolation_level=None)  # the conversion of docs/deploying.md
    for statement in ("PRAGMA journal_mode=DELETE", "PRAGMA page_size=8192", "VACUUM", "PRAGMA journal_mode=WAL"):
        converted.execute(statement)
    converted.close()
    assert run_json("db", "status")["sqlite_page_bytes"] == 8192
    assert "pages" not in invoke("db", "status").stdout


def test_c11_a_store_behind_is_refused_with_the_command_to_run_and_no_password(cli_env, monkeypatch):
    from sqlalchemy import text

    from store.database.db import engine_for
    from store.database.migrate import head_revision

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


def test_links_are_named_by_a_label_matched_ignoring_case(cli_env):
    """Issue 18.8: LINK arguments take an id or a unique label (C11)."""
    _demo_buyer()
    made = run_json("link", "create", "acme trading", "port=NLRTM", "--label", "Rotterdam sheet")
    listed = run_json("link", "list", "Acme Trading")["links"]
    assert listed[0]["label"] == "Rotterdam sheet"
    details = assert_error(run_json("link", "create", "Acme Trading", "port=BRSSZ", "--label", "ROTTERDAM SHEET", code=1), "VALIDATION_ERROR")
    assert details["parameter"] == "label"
    body = run_json("link", "revoke", "rotterdam sheet")
    assert body["id"] == made["id"]
    missed = run_json("link", "revoke", "Rotterdam", code=1)
    assert "did you mean 'Rotterdam sheet'?" in missed["error"]["message"]


def test_the_public_base_url_is_stored_once_and_every_command_prints_it(cli_env, monkeypatch):
    """Issue 18.6: `lineups config set base-url` (or `serve --base-url`) keeps the
    public address in the store; link create and list --show-tokens use it, a flag or
    $LINEUPS_BASE_URL overrides it for one command."""
    from cli.main import Context
    from cli.serve import _settings

    monkeypatch.delenv("LINEUPS_BASE_URL", raising=False)
    _demo_buyer()
    assert run_json("config", "get", "base-url") == {"name": "base-url", "value": None}
    assert run_json("config", "set", "base-url", "https://lineups.example.com/") == {
        "name": "base-url", "value": "https://lineups.example.com"}
    made = run_json("link", "create", "Acme Trading", "port=NLRTM")
    assert made["url"].startswith("https://lineups.example.com/v1/share/sl_")
    shown = run_json("link", "list", "Acme Trading", "--show-tokens")["links"]
    assert shown[0]["url"] == made["url"]
    flagged = run_json("link", "create", "Acme Trading", "--base-url", "http://10.0.0.5:8000")
    assert flagged["url"].startswith("http://10.0.0.5:8000/v1/share/")
    monkeypatch.setenv("LINEUPS_BASE_URL", "http://env.example:9000")
    assert run_json("link", "create", "Acme Trading")["url"].startswith("http://env.example:9000/v1/share/")
    monkeypatch.delenv("LINEUPS_BASE_URL")

    served = _settings(Context(None, True), "0.0.0.0", 8123)  # serve without --base-url
    assert served.base_url == "https://lineups.example.com"
    served = _settings(Context(None, True, "https://new.example.com"), "0.0.0.0", 8123)
    assert served.base_url == "https://new.example.com"
    assert run_json("config", "list") == {"settings": {"base-url": "https://new.example.com"}}
    run_json("config", "unset", "base-url")
    assert _settings(Context(None, True), "0.0.0.0", 8123).base_url == "http://127.0.0.1:8123"
    for bad in ("lineups.example.com", "ftp://x.example", "https://x.example/?a=1"):
        assert assert_error(run_json("config", "set", "base-url", bad, code=1), "VALIDATION_ERROR")["parameter"] == "base-url"
    assert "did you mean 'base-url'" in run_json("config", "get", "base_url", code=1)["error"]["message"]


def test_labels_are_per_buyer_and_a_shared_label_is_revoked_with_the_buyer(cli_env):
    """A buyer's label is never refused (nor revealed) because another buyer uses it;
    an operator revoking by a label two buyers use names the buyer."""
    _demo_buyer()
    run_json("buyer", "add", "Beta Grains")
    acme = run_json("link", "create", "Acme Trading", "port=NLRTM", "--label", "Weekly sheet")
    beta = run_json("link", "create", "Beta Grains", "port=BRSSZ", "--label", "weekly  SHEET")
    assert acme["id"] != beta["id"]
    details = assert_error(run_json("link", "create", "Beta Grains", "port=NLRTM", "--label", "Weekly sheet", code=1), "VALIDATION_ERROR")
    assert details["parameter"] == "label"
    shared = run_json("link", "revoke", "weekly sheet", code=1)
    assert "--buyer" in shared["error"]["message"]
    assert run_json("link", "revoke", "weekly sheet", "--buyer", "beta grains")["id"] == beta["id"]
    listed = {row["id"]: row for row in run_json("link", "list", "Acme Trading")["links"]}
    assert listed[acme["id"]]["revoked_at"] is None  # Acme's link of that label untouched
