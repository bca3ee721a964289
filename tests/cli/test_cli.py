"""The `lineups` operator command line (C11): every command's `--json` output is exactly
one JSON object, refused input exits 1 with the C5 error body, usage errors exit 2.

Commands run through click's CliRunner against a fresh store on SQLite and PostgreSQL
(`cli_env`); one test runs the installed console script as a real process."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import lineups
from store.access import accounts
from store.errors import Unauthorized

SANTOS_FILE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "santos-lineup-2023-12.csv"
SANTOS_MAPPING = Path(__file__).resolve().parents[2] / "docs" / "examples" / "santos-mapping.toml"
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def invoke(*args: str):
    return CliRunner().invoke(lineups, list(args))


def run_json(*args: str, code: int = 0) -> dict:
    """Run a command with --json; check its exit status and that stdout is exactly one
    JSON object; return it."""
    result = invoke(*args, "--json")
    assert result.exit_code == code, (result.stdout, result.stderr, result.exception)
    assert result.stdout.endswith("\n") and result.stdout.count("\n") == 1, result.stdout
    body = json.loads(result.stdout)
    assert isinstance(body, dict)
    return body


def assert_error(body: dict, code: str) -> dict:
    """The C5 error body; returns its details."""
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code
    assert body["error"]["message"]
    return body["error"]["details"]


def write_feed(path: Path, rows: list[dict]) -> Path:
    columns = list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, columns)
        writer.writeheader()
        writer.writerows(rows)
    return path


def good_rows() -> list[dict]:
    return [
        {"ref": "A1", "port_unlocode": "BRSSZ", "vessel_imo": "9074729", "vessel_name": "Ocean Grace",
         "commodity": "soja", "eta": "2024-01-05T10:00:00Z", "operation": "load"},
        {"ref": "A2", "port_unlocode": "BRPNG", "vessel_name": "MV Star", "commodity": "Widgets",
         "eta": "2024-01-07", "operation": "DISCH"},
    ]


@pytest.fixture
def feed(cli_env) -> dict:
    return run_json("feed", "add", "Santos Lineup", "--port", "BRSSZ", "--port", "brpng", "--frequency", "daily")


@pytest.fixture
def buyer(cli_env) -> dict:
    return run_json("buyer", "add", "Acme Trading")


# ---------------------------------------------------------------- each command's JSON


def test_feed_add_and_list(feed):
    assert set(feed) == {"id", "name"}
    assert feed["name"] == "Santos Lineup"
    listed = run_json("feed", "list")
    assert set(listed) == {"feeds"}
    (only,) = listed["feeds"]
    assert only["id"] == feed["id"]
    assert [p["unlocode"] for p in only["ports"]] == ["BRSSZ", "BRPNG"]
    assert (only["port_unlocode"], only["port_name"], only["frequency"]) == ("BRSSZ", "Santos", "daily")


def test_buyer_add_suspend_resume(buyer, sessions):
    assert set(buyer) == {"id", "name", "status"}
    assert (buyer["name"], buyer["status"]) == ("Acme Trading", "active")
    key = run_json("key", "create", "Acme Trading")["key"]
    suspended = run_json("buyer", "suspend", "Acme Trading")
    assert suspended == {**buyer, "status": "suspended", "pending": False}  # at once (C5)
    with sessions() as session:
        with pytest.raises(Exception) as caught:
            accounts.authenticate(session, key)
        assert caught.value.status == 403
    assert run_json("buyer", "resume", buyer["id"]) == {**buyer, "pending": False}  # no feeds: no view to wait for
    with sessions() as session:
        assert accounts.authenticate(session, key).id == buyer["id"]


def test_key_create_and_revoke(buyer, sessions):
    created = run_json("key", "create", buyer["id"])
    assert {"key", "buyer_id"} <= set(created)
    assert created["buyer_id"] == buyer["id"]
    key = created["key"]
    assert key.startswith("lk_") and len(key) == 35
    revoked = run_json("key", "revoke", created["prefix"])
    assert {"key", "buyer_id"} <= set(revoked)
    assert revoked["key"] is None and revoked["buyer_id"] == buyer["id"]
    assert revoked["revoked_at"].endswith("Z")
    with sessions() as session:
        with pytest.raises(Unauthorized):
            accounts.authenticate(session, key)


def test_buyer_list_shows_every_buyer_and_their_status(buyer):
    """Issue 50.3: an operator can list the buyers the store holds (C11: --json is one
    object), with the status a suspension changed."""
    other = run_json("buyer", "add", "Zenith Grains")
    run_json("buyer", "suspend", "Zenith Grains")
    listed = run_json("buyer", "list")
    assert set(listed) == {"buyers"}
    assert [(b["id"], b["name"], b["status"]) for b in listed["buyers"]] == [
        (buyer["id"], "Acme Trading", "active"), (other["id"], "Zenith Grains", "suspended")]
    assert all(b["created_at"].endswith("Z") for b in listed["buyers"])
    text = invoke("buyer", "list")
    assert text.exit_code == 0 and "Zenith Grains" in text.stdout and "suspended" in text.stdout


def test_key_list_shows_a_buyers_keys_by_prefix_never_the_key(buyer, sessions):
    """Issue 50.3, C5: keys are listed by id and prefix with created, last used and
    revoked; neither the key (shown once, at creation) nor its stored hash appears."""
    first = run_json("key", "create", "Acme Trading")
    second = run_json("key", "create", "Acme Trading")
    run_json("key", "create", run_json("buyer", "add", "Zenith Grains")["id"])  # another buyer's
    with sessions() as session:
        accounts.authenticate(session, first["key"])
        session.commit()
    revoked = run_json("key", "revoke", second["id"])
    listed = run_json("key", "list", "acme  trading")
    assert listed["buyer_id"] == buyer["id"]
    keys = {k["id"]: k for k in listed["keys"]}
    assert {i: k["prefix"] for i, k in keys.items()} == {first["id"]: first["prefix"], second["id"]: second["prefix"]}
    assert [k["created_at"] for k in listed["keys"]] == sorted(k["created_at"] for k in listed["keys"])  # oldest first
    assert set(keys[first["id"]]) == {"id", "prefix", "created_at", "last_used_at", "revoked_at"}
    assert keys[first["id"]]["last_used_at"] is not None and keys[first["id"]]["revoked_at"] is None
    assert keys[second["id"]]["revoked_at"] == revoked["revoked_at"]
    text = invoke("key", "list", "Acme Trading")
    for shown in (json.dumps(listed), text.stdout):
        for made in (first, second):
            assert made["key"] not in shown and accounts.hash_key(made["key"]) not in shown
    assert first["prefix"] in text.stdout
    assert_error(run_json("key", "list", "Nobody", code=1), "NOT_FOUND")


def test_subscription_set(buyer, feed):
    body = run_json("subscription", "set", "Acme Trading", "Santos Lineup", "trial")
    # The feed has no records yet: its view is built at once by nobody, so the change waits (issue 47).
    assert body == {"buyer_id": buyer["id"], "feed_id": feed["id"], "status": "trial", "feed_ids": [feed["id"]],
                    "pending": True}
    body = run_json("subscription", "set", buyer["id"], feed["id"], "CANCELLED")
    assert body["status"] == "cancelled" and body["pending"] is False


def test_a_subscription_change_returns_at_once_and_takes_effect_when_its_view_is_built(buyer, feed, tmp_path,
                                                                                     sessions):
    """Issue 47: `subscription set` commits what the buyer wants and returns without
    building; the buyer reads their previous feeds until `lineups views build` (or a
    server's builder) has built the view of their new ones and switched them; a
    cancellation takes effect at once; `--wait` builds and switches before it returns."""
    from sqlalchemy import select

    from store.database.schema import MergedView
    from store.views.upkeep import ViewKey

    run_json("ingest", feed["id"], str(write_feed(tmp_path / "feed.csv", good_rows())))
    other = run_json("feed", "add", "Paranagua Lineup", "--port", "BRPNG")
    body = run_json("subscription", "set", buyer["id"], feed["id"], other["id"], "active")
    assert body["pending"] is True and body["feed_ids"] == [feed["id"], other["id"]]
    with sessions() as session:
        assert session.scalars(select(MergedView)).all() == []  # nothing built by the command
        assert accounts.entitled_feeds(session, buyer["id"]) == []  # still their previous feeds: none
    shown = run_json("buyer", "show", buyer["id"])
    assert (shown["view"], shown["switched"], shown["feeds"]) == ("building", False, [])
    assert shown["wanted_feeds"] == sorted([feed["id"], other["id"]])
    assert {s["feed_id"]: (s["status"], s["requested"]) for s in shown["subscriptions"]} == {
        feed["id"]: (None, "active"), other["id"]: (None, "active")}
    assert run_json("views", "build") == {"switched": [buyer["id"]], "waiting": []}
    shown = run_json("buyer", "show", buyer["id"])
    assert (shown["view"], shown["switched"], shown["feeds"]) == ("ready", True, sorted([feed["id"], other["id"]]))
    listed = run_json("subscription", "list", buyer["id"])["buyers"]
    assert [s["status"] for s in listed[0]["subscriptions"]] == ["active", "active"]

    both = ViewKey.of("all", [feed["id"], other["id"]])
    body = run_json("subscription", "set", buyer["id"], other["id"], "cancelled")  # access removed at once
    with sessions() as session:
        assert [f.id for f in accounts.entitled_feeds(session, buyer["id"])] == [feed["id"]]
        # No one read the view of both feeds, and no one can: gone after the command.
        assert session.scalar(select(MergedView).where(MergedView.feed_set == both.feed_set)) is None
    body = run_json("subscription", "set", buyer["id"], other["id"], "trial", "--wait")
    assert body["pending"] is False
    with sessions() as session:
        assert {f.id for f in accounts.entitled_feeds(session, buyer["id"])} == {feed["id"], other["id"]}
    assert run_json("buyer", "show", buyer["id"])["view"] == "ready"


@pytest.mark.parametrize("backend", ["sqlite"])  # SQLite's one write lock
def test_a_command_that_waits_too_long_for_the_store_says_so_and_changes_nothing(buyer, feed, cli_env, sessions,
                                                                                 monkeypatch):
    import sqlite3

    from store.database.schema import Subscription

    monkeypatch.setattr("store.database.db.SQLITE_BUSY_S", 0.2)
    other_writer = sqlite3.connect(cli_env.db_url.removeprefix("sqlite:///"))
    other_writer.execute("BEGIN IMMEDIATE")  # a long ingest, say
    try:
        body = run_json("subscription", "set", buyer["id"], feed["id"], "active", code=1)
    finally:
        other_writer.rollback()
        other_writer.close()
    assert_error(body, "INTERNAL_ERROR")
    assert "busy with another write" in body["error"]["message"] and "nothing was changed" in body["error"]["message"]
    with sessions() as session:
        assert session.get(Subscription, (buyer["id"], feed["id"])) is None
    assert run_json("subscription", "set", buyer["id"], feed["id"], "active")["status"] == "active"


def test_ingest_and_reingest(feed, tmp_path):
    path = write_feed(tmp_path / "feed.csv", good_rows())
    body = run_json("ingest", "Santos Lineup", str(path))
    assert body == {"inserted": 2, "updated": 0, "unchanged": 0, "unresolved_commodities": 1}
    rows = good_rows()
    rows[0]["eta"] = "2024-01-06T10:00:00Z"
    body = run_json("ingest", feed["id"], str(write_feed(tmp_path / "v2.csv", rows)))
    assert body == {"inserted": 0, "updated": 1, "unchanged": 1, "unresolved_commodities": 1}


def test_ingest_of_a_bad_file_is_refused_and_writes_nothing(feed, tmp_path, sessions):
    rows = good_rows() + [
        {"ref": "A1", "port_unlocode": "BRSSZ", "vessel_name": "Dup"},
        {"ref": "A4", "port_unlocode": "BRSSZ", "vessel_imo": "9074728", "eta": "tomorrow"},
    ]
    body = run_json("ingest", "Santos Lineup", str(write_feed(tmp_path / "bad.csv", rows)), code=1)
    details = assert_error(body, "VALIDATION_ERROR")
    assert details == [
        {"line": 4, "field": "ref", "reason": "duplicate ref 'A1' (first on line 2)"},
        {"line": 5, "field": "eta", "reason": "'tomorrow' is not a date (ISO 8601 or YYYY-MM-DD)"},
        {"line": 5, "field": "vessel_imo", "reason": "'9074728' is not a valid IMO number (7 digits, check digit)"},
    ]
    assert "refused whole" in body["error"]["message"]
    assert run_json("commodity", "unresolved") == {"unresolved": []}  # no record was stored


def test_ingest_with_a_mapping(feed):
    if not SANTOS_FILE.exists():
        pytest.skip(f"{SANTOS_FILE} is not on this machine")
    args = ("ingest", "Santos Lineup", str(SANTOS_FILE), "--mapping", str(SANTOS_MAPPING))
    assert run_json(*args) == {"inserted": 311, "updated": 0, "unchanged": 0, "unresolved_commodities": 7}
    assert run_json(*args)["unchanged"] == 311


def test_commodity_unresolved_and_map(feed, tmp_path):
    run_json("ingest", "Santos Lineup", str(write_feed(tmp_path / "feed.csv", good_rows())))
    assert run_json("commodity", "unresolved") == {"unresolved": [{"raw": "Widgets", "count": 1}]}
    body = run_json("commodity", "map", "widgets", "Bagged Cargo")
    assert {"raw", "leaf", "records_resolved"} <= set(body)
    assert (body["raw"], body["leaf"], body["records_resolved"]) == ("widgets", "Bagged Cargo", 1)
    assert run_json("commodity", "unresolved") == {"unresolved": []}
    details = assert_error(run_json("commodity", "map", "widgets", "Unobtainium", code=1), "VALIDATION_ERROR")
    assert details["parameter"] == "leaf"


def test_demo(cli_env):
    body = run_json("demo", "--records", "30", "--seed", "3", "--anchor-date", "2024-03-01")
    assert set(body) == {"buyer_id", "api_key", "feeds", "records"}
    assert body["records"] == 30
    assert {f["subscription"] for f in body["feeds"]} == {"active", "trial", "cancelled"}
    # A second demo in the same store is refused.
    assert_error(run_json("demo", "--records", "30", code=1), "VALIDATION_ERROR")


# ---------------------------------------------------------------- refused input: exit 1


@pytest.mark.parametrize(
    "args",
    [
        ("ingest", "No Such Feed", "FILE"),
        ("subscription", "set", "Nobody", "Santos Lineup", "active"),
        ("subscription", "set", "Acme Trading", "No Such Feed", "active"),
        ("buyer", "suspend", "Nobody"),
        ("key", "create", "Nobody"),
        ("key", "revoke", "lk_" + "0" * 32),
    ],
)
def test_unknown_names_are_not_found(feed, buyer, tmp_path, args):
    path = write_feed(tmp_path / "feed.csv", good_rows())
    args = [str(path) if a == "FILE" else a for a in args]
    assert_error(run_json(*args, code=1), "NOT_FOUND")


@pytest.mark.parametrize(
    "args",
    [
        ("feed", "add", "Santos Lineup", "--port", "BRSSZ"),  # the name is taken
        ("feed", "add", "Elsewhere", "--port", "XXZZZ"),  # not in the directory
        ("feed", "add", "Rated", "--port", "BRSSZ", "--coverage-rating", "9"),
        ("buyer", "add", "Acme Trading"),
    ],
)
def test_refused_input_is_a_validation_error(feed, buyer, args):
    details = assert_error(run_json(*args, code=1), "VALIDATION_ERROR")
    assert set(details) == {"parameter", "reason"}


def test_refused_input_without_json_explains_on_stderr(feed, tmp_path):
    rows = [{"ref": "A1", "port_unlocode": "BRSSZ", "vessel_name": "X", "dwt": "heavy"}]
    result = invoke("ingest", "Santos Lineup", str(write_feed(tmp_path / "bad.csv", rows)))
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "Error (VALIDATION_ERROR)" in result.stderr
    assert "line 2: dwt: 'heavy' is not a number" in result.stderr


# ---------------------------------------------------------------- usage errors: exit 2


@pytest.mark.parametrize(
    "args",
    [
        ("feed", "add", "No Port"),  # --port is required
        ("feed", "add", "X", "--port", "BRSSZ", "--coverage-rating", "high"),
        ("buyer", "add"),
        ("subscription", "set", "Acme Trading", "Santos Lineup", "paused"),
        ("ingest", "Santos Lineup"),
        ("ingest", "Santos Lineup", "/no/such/file.csv"),
        ("demo", "--records", "5"),
        ("feed", "list", "--colour", "red"),
        ("frobnicate",),
        ("feed", "list", "--db", "not a database url"),
    ],
)
def test_usage_errors_exit_2(cli_env, args):
    result = invoke(*args, "--json")
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert "Usage:" in result.stderr or "Error" in result.stderr


def test_db_flag_wins_over_the_environment(store_settings, sessions, monkeypatch, tmp_path):
    elsewhere = tmp_path / "elsewhere.db"
    monkeypatch.setenv("LINEUPS_DB", f"sqlite:///{elsewhere}")
    if store_settings.db_schema:
        monkeypatch.setenv("LINEUPS_DB_SCHEMA", store_settings.db_schema)
    else:
        monkeypatch.delenv("LINEUPS_DB_SCHEMA", raising=False)
    created = run_json("feed", "add", "Flagged Feed", "--port", "NLRTM", "--db", store_settings.db_url)
    assert not elsewhere.exists()
    with sessions() as session:
        from store.intake.feeds import find_feed

        assert find_feed(session, "Flagged Feed").id == created["id"]


def test_unreachable_database_is_reported_as_one_json_object(cli_env):
    body = run_json("feed", "list", "--db", "postgresql+psycopg://nobody:secret@127.0.0.1:1/none", code=1)
    assert_error(body, "INTERNAL_ERROR")
    assert "secret" not in body["error"]["message"]


# ---------------------------------------------------------------- the installed script


def lineups_command() -> list[str]:
    script = Path(sys.executable).with_name("lineups")
    if script.exists():
        return [str(script)]
    if shutil.which("lineups"):
        return [shutil.which("lineups")]
    return [sys.executable, "-c", "from cli.main import main; main()"]


def test_console_script_runs_as_a_process(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINEUPS_")}
    env["LINEUPS_DB"] = f"sqlite:///{tmp_path / 'lineups.db'}"

    def run(*args: str, code: int = 0) -> dict:
        done = subprocess.run(
            [*lineups_command(), *args, "--json"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
        )
        assert done.returncode == code, done.stderr
        assert done.stdout.count("\n") == 1, done.stdout
        return json.loads(done.stdout)

    demo = run("demo", "--records", "20", "--anchor-date", "2024-03-01")
    assert demo["records"] == 20
    assert len(run("feed", "list")["feeds"]) == len(demo["feeds"])
    assert_error(run("buyer", "resume", "Nobody", code=1), "NOT_FOUND")
    usage = subprocess.run([*lineups_command(), "buyer", "add"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert usage.returncode == 2 and usage.stdout == ""
    assert (tmp_path / "lineups.db").exists()


# ---------------------------------------------------------------- bad feed files (issue 16.11-15, 18.10)


def test_ingest_of_dates_out_of_range_reports_every_bad_row_as_one_json_object(feed, tmp_path):
    rows = [
        {"ref": "A1", "port_unlocode": "BRSSZ", "vessel_name": "X", "eta": "0001-01-01"},
        {"ref": "A2", "port_unlocode": "BRSSZ", "vessel_name": "Y", "eta": "9999-12-31", "quantity": "1e308"},
        {"ref": "A3", "port_unlocode": "BRSSZ", "vessel_name": "Z", "eta": "unknown"},
    ]
    details = assert_error(run_json("ingest", "Santos Lineup", str(write_feed(tmp_path / "d.csv", rows)), code=1), "VALIDATION_ERROR")
    assert [(d["line"], d["field"]) for d in details] == [(2, "eta"), (3, "eta"), (3, "quantity"), (4, "eta")]


def test_ingest_of_a_binary_file_is_one_line_without_traceback(feed, tmp_path):
    path = tmp_path / "program.csv"
    path.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(range(256)) * 80)
    body = run_json("ingest", "Santos Lineup", str(path), code=1)
    assert "not a text file" in body["error"]["message"]
    result = invoke("ingest", "Santos Lineup", str(path))
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("Error (VALIDATION_ERROR): program.csv is not a text file")


def test_ingest_names_a_ragged_row_in_words(feed, tmp_path):
    path = tmp_path / "ragged.csv"
    path.write_text("ref,port_unlocode,vessel_name,eta,etb,quantity,dwt,operation,commodity\n"
                    "A1,BRSSZ,X,2024-01-01,,5,1,load,coal,extra1,extra2\n", encoding="utf-8")
    result = invoke("ingest", "Santos Lineup", str(path))
    assert result.exit_code == 1
    assert "  line 2 has 11 cells, the header has 9" in result.stderr


def test_ingest_says_how_a_foreign_file_was_read(feed, tmp_path):
    path = tmp_path / "semi.csv"
    path.write_bytes("ref;port_unlocode;vessel_name\nA1;BRSSZ;São Luís\n".encode("cp1252"))
    result = invoke("ingest", "Santos Lineup", str(path))
    assert result.exit_code == 0, result.stderr
    assert "Read as semicolon-separated Windows-1252 text" in result.stderr
    assert run_json("ingest", "Santos Lineup", str(path)) == {"inserted": 0, "updated": 0, "unchanged": 1, "unresolved_commodities": 0}


def test_ingest_does_not_echo_what_the_mapping_named(feed, tmp_path):
    """Issue 18.10: "Read as …, a --mapping file reads it otherwise" is for what was
    detected; a mapping that names the delimiter is not told about it again."""
    path = tmp_path / "semi.csv"
    path.write_bytes("ref;vessel;port\nA1;São Luís;BRSSZ\n".encode("cp1252"))
    mapping = tmp_path / "semi.toml"
    mapping.write_text('delimiter = ";"\n[columns]\nref = "ref"\nvessel_name = "vessel"\nport_unlocode = "port"\n')
    result = invoke("ingest", "Santos Lineup", str(path), "--mapping", str(mapping))
    assert result.exit_code == 0, result.stderr
    assert "Read as Windows-1252 text" in result.stderr and "separated" not in result.stderr
    mapping.write_text('delimiter = ";"\nencoding = "cp1252"\n[columns]\nref = "ref"\nvessel_name = "vessel"\nport_unlocode = "port"\n')
    result = invoke("ingest", "Santos Lineup", str(path), "--mapping", str(mapping))
    assert result.exit_code == 0, result.stderr
    assert "Read as" not in result.stderr


def test_ingest_of_the_santos_file_without_its_mapping_names_the_option(feed):
    if not SANTOS_FILE.exists():
        pytest.skip(f"{SANTOS_FILE} is not on this machine")
    result = invoke("ingest", "Santos Lineup", str(SANTOS_FILE))
    assert result.exit_code == 1
    error = next(line for line in result.stderr.splitlines() if line.startswith("Error"))
    assert "none of the file's columns is a feed field" in error and "--mapping" in error


# ---------------------------------------------------------------- names (issue 18.8)


def test_feed_and_buyer_names_match_ignoring_case_and_spacing(feed, buyer, tmp_path):
    path = write_feed(tmp_path / "feed.csv", good_rows())
    assert run_json("ingest", "santos  LINEUP", str(path))["inserted"] == 2
    assert run_json("buyer", "suspend", "acme trading")["status"] == "suspended"
    body = run_json("subscription", "set", "ACME TRADING", " santos lineup ", "trial")
    assert (body["buyer_id"], body["feed_id"]) == (buyer["id"], feed["id"])


def test_ingest_names_the_feed_as_stored_however_it_was_typed(feed, tmp_path):
    path = write_feed(tmp_path / "feed.csv", good_rows())
    result = invoke("ingest", "santos  LINEUP", str(path))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("Ingested into Santos Lineup: 2 inserted")


def test_a_name_taken_but_for_case_is_taken(feed, buyer):
    assert "exists already" in assert_error(run_json("feed", "add", "SANTOS LINEUP", "--port", "BRSSZ", code=1), "VALIDATION_ERROR")["reason"]
    assert "exists already" in assert_error(run_json("buyer", "add", "acme trading", code=1), "VALIDATION_ERROR")["reason"]


def test_a_missed_name_suggests_near_names(feed, buyer, tmp_path):
    path = write_feed(tmp_path / "feed.csv", good_rows())
    body = run_json("ingest", "Santos", str(path), code=1)
    assert_error(body, "NOT_FOUND")
    assert "did you mean 'Santos Lineup'?" in body["error"]["message"]
    body = run_json("key", "create", "Acme Tradeing", code=1)
    assert "did you mean 'Acme Trading'?" in body["error"]["message"]
    result = invoke("buyer", "resume", "Zebra Shipping")
    assert result.exit_code == 1 and "did you mean" not in result.stderr


# ---------------------------------------------------------------- the taxonomy (issue 18.7)


def test_commodity_list_shows_the_leaves_and_searches_them(cli_env):
    every = run_json("commodity", "list")["commodities"]
    assert {"id", "name", "subgroup", "group", "aliases"} == set(every[0])
    assert any(c["name"] == "Thermal Coal" and c["subgroup"] == "Coal" and c["group"] == "Dry Bulk" for c in every)
    found = run_json("commodity", "list", "steam coal")["commodities"]
    assert [c["name"] for c in found] == ["Thermal Coal"]
    coal = {c["name"] for c in run_json("commodity", "list", "coal")["commodities"]}
    assert {"Thermal Coal", "Coking Coal", "Coal (Unspecified)"} <= coal
    assert run_json("commodity", "list", "unobtainium") == {"commodities": []}


def test_commodity_list_as_a_tree(cli_env):
    tree = run_json("commodity", "list", "--tree", "coking")["groups"]
    assert tree == [{"name": "Dry Bulk", "subgroups": [{"name": "Coal", "leaves": [
        {"id": "dry-bulk/coal/coking-coal", "name": "Coking Coal", "aliases": tree[0]["subgroups"][0]["leaves"][0]["aliases"]}
    ]}]}]
    result = invoke("commodity", "list", "--tree")
    assert result.exit_code == 0
    assert "Dry Bulk\n  Coal\n    Thermal Coal" in result.stdout


def test_commodity_map_to_a_wrong_leaf_suggests_the_nearest(feed, tmp_path):
    run_json("ingest", "Santos Lineup", str(write_feed(tmp_path / "feed.csv", good_rows())))
    details = assert_error(run_json("commodity", "map", "widgets", "Soybean Mael", code=1), "VALIDATION_ERROR")
    assert details["parameter"] == "leaf" and details["suggestions"][0] == "Soybean Meal"
    details = assert_error(run_json("commodity", "map", "widgets", "Coal", code=1), "VALIDATION_ERROR")
    assert "is a subgroup" in details["reason"]
    assert {"Thermal Coal", "Coking Coal", "Coal (Unspecified)"} <= set(details["suggestions"])


def test_quality_duplicates_counts_likely_duplicates_by_cause(cli_env):
    """Issue 19: the demo makes both kinds of near-duplicate; the merge resolves
    them, so the report's IMO-missing and less-specific counts are zero, and the
    report counts what remains (counterparty disagreements, other)."""
    run_json("demo", "--records", "400", "--seed", "7", "--anchor-date", "2024-03-01")
    body = run_json("quality", "duplicates", "--buyer", "Demo Buyer")
    assert body["causes"] == ["counterparty disagreement", "IMO missing", "name of several IMOs", "commodity less specific", "other"]
    (demo_buyer,) = body["buyers"]
    assert demo_buyer["buyer"] == "Demo Buyer" and demo_buyer["rows"] > 100
    assert demo_buyer["IMO missing"] == 0 and demo_buyer["commodity less specific"] == 0
    assert demo_buyer["pairs"] == sum(demo_buyer[c] for c in body["causes"])
    assert run_json("quality", "duplicates")["buyers"] == body["buyers"]  # the only buyer
    text = invoke("quality", "duplicates")
    assert text.exit_code == 0 and "counterparty disagreement" in text.stdout and "Demo Buyer" in text.stdout
    assert_error(run_json("quality", "duplicates", "--buyer", "Nobody", code=1), "NOT_FOUND")


def test_help_texts_cite_no_clause_or_issue_numbers():
    """Issue 18.2: operators read `--help`; the project's clause and issue numbers mean
    nothing to them (code comments may cite them)."""
    import re

    import click

    from cli.main import lineups

    cited = re.compile(r"\bC(1[01]|[1-9])(\.\d+)?\b|\bissue \d+")

    def texts(command, path):
        yield path, command.help or ""
        for param in command.params:
            yield f"{path} {param.name}", getattr(param, "help", None) or ""
        if isinstance(command, click.Group):
            context = click.Context(command)
            for name in command.list_commands(context):
                yield from texts(command.get_command(context, name), f"{path} {name}")

    found = [(path, text) for path, text in texts(lineups, "lineups") if cited.search(text)]
    assert found == [], found
