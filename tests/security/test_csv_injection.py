"""CSV injection (C9; issue 9): no exported cell starts with a character that makes a
spreadsheet run it: `=`, `+`, `-`, `@`, tab, CR or NUL.

Records whose every free-text field starts with each of these (and a feed whose name
does) go through the real ingest path, then out through /v1/lineups?format=csv (every
page, both merge modes) and a share link; the csv module reads each export back and
every cell is checked. What each character meets on the way:

- `=`, `+`, `-`, `@`: stored as given, written with a leading `'`.
- tab and CR: ingest trims leading and trailing whitespace (C1 blanks), so the stored
  value starts with what followed them; a formula there is neutralised like any other.
- NUL: refused at ingest, as a bad row naming the field (PostgreSQL cannot store it,
  and the file must be refused the same way on both back ends). The CSV writer
  neutralises it anyway, should one reach it (tested on the writer directly).
"""

from __future__ import annotations

import csv
import io
import json
import re

import pytest

from api import render
from store.access import links
from store.intake import feeds, ingest
from store.database.db import transaction
from store.errors import ValidationError
from store.fields import INTEGER_FIELDS, NUMBER_FIELDS, RECORD_FIELDS, TIME_FIELDS
from store.database.schema import Buyer, Record
from store.views.stored import READ_COLUMNS
from tests.api.tiny_data import new_buyer

DANGEROUS = ("=", "+", "-", "@", "\t", "\r", "\0")
TEXT_FIELDS = tuple(f for f in RECORD_FIELDS if f not in (*TIME_FIELDS, *INTEGER_FIELDS, *NUMBER_FIELDS))
#: Free-text columns of a feed file (the others are codes, numbers, dates, enumerations).
FREE_TEXT = ("port_name", "country_name", "berth_terminal", "vessel_name", "vessel_type", "commodity",
             "shipper", "receiver", "charterer", "operator", "ship_agent")
FORMULA = "2+5+cmd|' /C calc'!A0"
TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")


def feed_row(n: int, start: str) -> dict:
    row = {"ref": f"X{n}", "port_unlocode": "BRSSZ", "eta": f"2024-03-{n + 1:02d}T00:00:00Z",
           "dwt": "50000", "quantity": "1000.5", "quantity_unit": "MT"}
    row.update({field: f"{start}{field}{FORMULA}" for field in FREE_TEXT})
    return row


def write_jsonl(path, rows) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


@pytest.fixture
def injected(make_api, sessions, tmp_path):
    """A store with a feed "+Injected Feed" whose records start every free-text field
    with each dangerous character (NUL aside), a buyer of it, and a live API."""
    rows = [feed_row(n, start) for n, start in enumerate(DANGEROUS) if start != "\0"]
    rows += [feed_row(10 + n, " \t" + start) for n, start in enumerate("=+-@")]  # hidden behind whitespace
    path = tmp_path / "injected.jsonl"
    write_jsonl(path, rows)
    with transaction(sessions) as session:
        feed = feeds.add_feed(session, "+Injected Feed", ["BRSSZ"])
        report = ingest.ingest_file(session, feed, path)
        buyer, key = new_buyer(session, "Injected Buyer", {feed: "active"})
        ids = {"feed": feed.id, "buyer": buyer.id}
    assert report.inserted == len(rows)
    return make_api(key), ids, rows


def read_csv(content: bytes) -> list[dict]:
    assert content.startswith(render.BOM.encode())
    return list(csv.DictReader(io.StringIO(content.decode("utf-8-sig"), newline="")))


def assert_cells_are_safe(records: list[dict]) -> None:
    assert records
    for record in records:
        assert list(record) == list(RECORD_FIELDS)
        for field, cell in record.items():
            if field in TEXT_FIELDS:
                assert not cell.startswith(DANGEROUS), (field, cell)
            elif field in TIME_FIELDS:
                assert cell == "" or TIME.match(cell), (field, cell)
            elif cell:  # numbers: never negative (ingest refuses that), so never "-…"
                assert float(cell) >= 0 and cell[0].isdigit(), (field, cell)


def expected_cells(rows: list[dict]) -> set[str]:
    """What the export must show for each injected value: the stored (trimmed) text,
    with a leading ' when it starts with a formula character."""
    return {"'" + row[f].strip() for row in rows for f in FREE_TEXT if row[f].strip().startswith(DANGEROUS)}


def paged_csv(api, **params) -> list[dict]:
    records, cursor = [], None
    while True:
        response = api.get("/v1/lineups", params={**params, "format": "csv", "limit": 3, **({"cursor": cursor} if cursor else {})})
        assert response.status_code == 200, response.text
        records += read_csv(response.content)
        if not (cursor := response.headers.get("X-Next-Cursor")):
            return records


@pytest.mark.parametrize("merge", ["all", "by_source"])
def test_api_csv_neutralises_every_formula_cell(injected, merge):
    api, _, rows = injected
    records = paged_csv(api, merge=merge)
    assert_cells_are_safe(records)
    cells = {cell for record in records for cell in record.values()}
    assert expected_cells(rows) <= cells
    assert {r["source_name"] for r in records} == {"'+Injected Feed"}
    # JSON is not a spreadsheet: it serves the stored text unchanged.
    data = api.lineups(merge=merge, limit=500)["data"]
    assert {r["shipper"] for r in data} == {row["shipper"].strip() for row in rows}


def test_share_link_csv_neutralises_every_formula_cell(injected):
    api, ids, rows = injected
    with transaction(api.sessions) as session:
        _, token = links.create_link(session, session.get(Buyer, ids["buyer"]), {}, api.settings.signing_secrets())
    records = read_csv(api.get(f"/v1/share/{token}", key=None).content)
    assert_cells_are_safe(records)
    assert expected_cells(rows) <= {cell for record in records for cell in record.values()}
    assert [r["id"] for r in records] == [r["id"] for r in paged_csv(api)]  # the whole result


def test_ingest_refuses_nul_in_any_text_field_and_writes_nothing(sessions, tmp_path):
    rows = [feed_row(0, "="), feed_row(1, "\0"), {**feed_row(2, "-"), "ref": "X2\0"}]
    path = tmp_path / "nul.jsonl"
    write_jsonl(path, rows)
    with transaction(sessions) as session:
        feed = feeds.add_feed(session, "NUL Feed", ["BRSSZ"])
        with pytest.raises(ValidationError) as refused:
            ingest.ingest_file(session, feed, path)
        assert session.query(Record).filter(Record.feed_id == feed.id).count() == 0
    problems = refused.value.details
    nul = [(p["line"], p["field"]) for p in problems if p["reason"] == "contains a NUL character"]
    assert sorted(nul) == sorted([(2, f) for f in FREE_TEXT] + [(3, "ref")])


@pytest.mark.parametrize("start", DANGEROUS)
def test_the_csv_writer_neutralises_each_character_itself(start):
    """Whatever reaches the writer (not only what ingest lets through)."""
    values = {field: f"{start}{FORMULA}" for field in TEXT_FIELDS}
    as_read = [tuple(values.get(name) for name in READ_COLUMNS)]
    (record,) = read_csv(render.csv_of_records(as_read))
    for field, value in values.items():
        assert record[field] == "'" + value, (field, record[field])
