"""Bad feed files given to the operator command line (issue 16 items 11-15; C10, C11).

Each attack of the issue, run as an operator runs it: `lineups ingest` as a process,
with `--json` and without. Every one must exit 1 with the contract's
VALIDATION_ERROR (with `--json`: stdout is exactly one JSON object, every bad row
named by line and field), no traceback, and nothing written to the store.
(tests/store/test_ingest.py and tests/cli/test_cli.py test each rule in detail.)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, select

from store.database.db import make_engine
from store.database.schema import Feed, Record, RecordRevision
from tests.production.conftest import lineups, store_env

FEED = "Santos Lineup"
HEADER = "ref,port_unlocode,vessel_name,eta,etb,quantity,dwt,operation,commodity\n"
GOOD = "G1,BRSSZ,Ocean Grace,2024-01-05,,65000,80000,load,soja\n"


def csv_file(path: Path, *rows: str) -> Path:
    path.write_text(HEADER + "".join(rows), encoding="utf-8")
    return path


def jsonl_file(path: Path, *lines: str) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def binary_file(folder: Path) -> Path:
    """The first 20 KB of a real executable (ELF on Linux) named `.csv`."""
    path = folder / "program.csv"
    path.write_bytes(Path(sys.executable).resolve().read_bytes()[:20_000])
    return path


def good_row(ref: str, **values) -> str:
    row = {"ref": ref, "port_unlocode": "BRSSZ", "vessel_name": "Ocean Grace", "eta": "2024-01-05", "quantity": 65000}
    return json.dumps({**row, **values})


# (name, file maker, the (line, field) of each problem, words that must be in the reasons)
ATTACKS = [
    ("dates out of range", lambda d: csv_file(
        d / "dates.csv", GOOD,
        "A1,BRSSZ,X,0001-01-01,,5,1,load,soja\n",
        "A2,BRSSZ,Y,9999-12-31,,5,1,load,soja\n",
        "A3,BRSSZ,Z,unknown,,5,1,load,soja\n",
        "A4,BRSSZ,W,2024-01-05,,lots,1,load,soja\n",
    ), [(3, "eta"), (4, "eta"), (5, "eta"), (6, "quantity")], ["'0001-01-01'", "'9999-12-31'", "'unknown' is not a date"]),
    ("binary named csv", binary_file, None, []),
    ("quantity no cargo has", lambda d: csv_file(
        d / "quantities.csv", GOOD,
        "A1,BRSSZ,X,2024-01-05,,1e308,1,load,soja\n",
        "A2,BRSSZ,Y,2024-01-05,,12345678901234567890123456,1,load,soja\n",
    ), [(3, "quantity"), (4, "quantity")], ["more than 100,000,000"]),
    ("ragged row", lambda d: csv_file(
        d / "ragged.csv", "A1,BRSSZ,X,2024-01-05,,5,1,load,soja,extra1,extra2\n", GOOD,
    ), [(2, None)], ["has 11 cells, the header has 9"]),
    # Issue 50.5: a ragged row hides none of the file's other problems (C10: every bad row in one run).
    ("ragged row among other bad rows", lambda d: csv_file(
        d / "ragged-and-more.csv", GOOD,
        "A1,BRSSZ,X,unknown,,5,1,load,soja\n",
        "A2,BRSSZ,X,2024-01-05,,5,1,load,soja,extra1,extra2\n",
        'A3,BRSSZ,"Two\nlines",2024-01-05,,lots,1,load,soja\n',
        "A4,BRSSZ,X,2024-01-05,,5,1,load,soja,extra\n",
        "A5,XX,X,2024-01-05,,5,1,load,soja\n",
    ), [(3, "eta"), (4, None), (5, "quantity"), (7, None), (8, "port_unlocode")],
        ["'unknown' is not a date", "has 11 cells, the header has 9", "'lots' is not a number",
         "has 10 cells, the header has 9", "'XX' is not a UN/LOCODE"]),
    ("jsonl", lambda d: jsonl_file(
        d / "feed.jsonl",
        good_row("J1", eta="unknown"),
        "not json",
        "[1]",
        good_row("J4", remarks="late"),
        good_row("J5", quantity=1e300),
    ), [(1, "eta"), (2, None), (3, None), (4, "remarks"), (5, "quantity")],
        ["'unknown' is not a date", "is not JSON", "is not a JSON object", "unknown column", "more than 100,000,000"]),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A SQLite store with one feed holding one record; returns `(env, what_is_stored)`."""
    folder = tmp_path_factory.mktemp("bad-feeds")
    url = f"sqlite:///{folder / 'lineups.db'}"
    env = store_env(url)
    assert lineups(env, "feed", "add", FEED, "--port", "BRSSZ", "--json").returncode == 0
    assert lineups(env, "ingest", FEED, str(csv_file(folder / "good.csv", GOOD)), "--json").returncode == 0
    engine = make_engine(url)

    def stored() -> tuple:
        with engine.connect() as connection:
            return (
                connection.scalar(select(func.count()).select_from(Record)),
                connection.scalar(select(func.count()).select_from(RecordRevision)),
                connection.scalar(select(Feed.data_version).where(Feed.name == FEED)),
            )

    yield env, stored
    engine.dispose()


@pytest.mark.parametrize("name, make, problems, words", ATTACKS, ids=[a[0] for a in ATTACKS])
def test_a_bad_feed_file_is_refused_whole_in_words(store, tmp_path, name, make, problems, words):
    env, stored = store
    path = make(tmp_path)
    before = stored()

    answer = lineups(env, "ingest", FEED, str(path), "--json")
    assert answer.returncode == 1, (answer.stdout, answer.stderr[-2000:])
    assert answer.stdout.count("\n") == 1 and answer.stdout.endswith("\n"), answer.stdout  # one JSON object
    error = json.loads(answer.stdout)["error"]
    assert error["code"] == "VALIDATION_ERROR" and "Traceback" not in answer.stderr, answer.stderr[-2000:]
    if problems is None:  # the file as a whole
        assert "not a text file" in error["message"] and error["details"] is None
    else:
        assert "nothing was written" in error["message"]
        assert [(d["line"], d["field"]) for d in error["details"]] == problems, error["details"]
        reasons = " | ".join(d["reason"] for d in error["details"])
        assert all(word in reasons for word in words), reasons
        assert "None" not in reasons

    said = lineups(env, "ingest", FEED, str(path))
    assert said.returncode == 1 and said.stdout == ""
    assert said.stderr.startswith("Error (VALIDATION_ERROR): ") and "Traceback" not in said.stderr, said.stderr[-2000:]
    assert stored() == before, "something was written"


def test_jsonl_and_csv_say_the_same_thing_of_the_same_value(store, tmp_path):
    env, _ = store
    jsonl = lineups(env, "ingest", FEED, str(jsonl_file(tmp_path / "f.jsonl", good_row("J1", eta="9999-12-31"))), "--json")
    as_csv = lineups(env, "ingest", FEED, str(csv_file(tmp_path / "f.csv", "J1,BRSSZ,X,9999-12-31,,5,1,load,soja\n")), "--json")
    (from_jsonl,), (from_csv,) = json.loads(jsonl.stdout)["error"]["details"], json.loads(as_csv.stdout)["error"]["details"]
    assert from_jsonl == {**from_csv, "line": 1}


@pytest.mark.parametrize("name, content", [
    ("empty.csv", b""), ("blank.csv", b"\xef\xbb\xbf\r\n  \n"), ("empty.jsonl", b""), ("blank.jsonl", b"\n\n"),
])
def test_an_empty_file_is_refused_as_empty(store, tmp_path, name, content):
    """Issue 50.5: an empty file (nothing but white space, a BOM allowed) says the file
    is empty, in the operator's words, not the parser's ("No columns to parse from file")."""
    env, stored = store
    path = tmp_path / name
    path.write_bytes(content)
    before = stored()
    answer = lineups(env, "ingest", FEED, str(path), "--json")
    assert answer.returncode == 1 and answer.stdout.count("\n") == 1, (answer.stdout, answer.stderr[-2000:])
    error = json.loads(answer.stdout)["error"]
    assert error["code"] == "VALIDATION_ERROR" and error["details"] is None
    assert error["message"].startswith(f"{name}: the file is empty"), error["message"]
    assert "No columns" not in error["message"] and "Traceback" not in answer.stderr
    human = lineups(env, "ingest", FEED, str(path))
    assert human.returncode == 1 and "the file is empty" in human.stderr
    assert stored() == before
