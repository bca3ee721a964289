"""Ingest of feed files (C1, C10, C11): validation refuses a bad file whole with a report
of every bad row, a good file is upserted by (feed, ref), and every change keeps the
previous version (issue 2: history).

Each test runs on SQLite and PostgreSQL (the `session` fixture)."""

from __future__ import annotations

import csv
import datetime as dt
import json
from pathlib import Path

import pandas as pd
import pytest
from sqlalchemy import func, select, text, update

from store.intake import feeds, ingest

from store.intake import commodities
from store.errors import NotFound, ValidationError
from store.views.history import eta_slips, record_history
from store.intake.mapping import Mapping
from store.database.schema import Feed, Record, RecordRevision
from store.fields import content_json

SANTOS_FILE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "santos-lineup-2023-12.csv"
SANTOS_MAPPING = Path(__file__).resolve().parents[2] / "docs" / "examples" / "santos-mapping.toml"

#: A row that passes every rule; tests change one field of it.
GOOD = {
    "ref": "R1",
    "port_unlocode": "BRSSZ",
    "vessel_imo": "9074729",
    "vessel_name": "Ocean Grace",
    "vessel_type": "Bulk Carrier",
    "dwt": "82000",
    "operation": "load",
    "commodity": "Soybeans",
    "quantity": "65000",
    "quantity_unit": "MT",
    "eta": "2024-01-05T10:00:00Z",
    "etb": "2024-01-06T08:00:00Z",
    "etd": "2024-01-08T18:00:00Z",
    "vessel_status": "expected",
    "shipper": "Cargill",
}


def row(**changes) -> dict:
    return {**GOOD, **changes}


def write_csv(path: Path, rows: list[dict], columns: list[str] | None = None) -> Path:
    columns = columns or list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, columns)
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture
def feed(session) -> Feed:
    return feeds.add_feed(session, "Test Feed", ["BRSSZ", "BRPNG"])


def ingest_rows(session, feed, tmp_path, rows, name="feed.csv", **kwargs) -> ingest.IngestReport:
    return ingest.ingest_file(session, feed, write_csv(tmp_path / name, rows, **kwargs))


def stored(session, feed, ref) -> dict:
    """The stored record's content, times as C1 strings."""
    record = session.scalar(select(Record).where(Record.feed_id == feed.id, Record.ref == ref))
    assert record is not None, f"no record {ref}"
    return {**content_json(record), "updated_at": record.updated_at, "version": record.version}


def counts(session) -> tuple[int, int]:
    return (
        session.scalar(select(func.count()).select_from(Record)),
        session.scalar(select(func.count()).select_from(RecordRevision)),
    )


def data_version(session, feed) -> int:
    return session.scalar(select(Feed.data_version).where(Feed.id == feed.id))


def refused(session, feed, path) -> list[dict]:
    """Ingest `path`, expect it refused with nothing written, return the details."""
    before = counts(session), data_version(session, feed)
    with pytest.raises(ValidationError) as caught:
        ingest.ingest_file(session, feed, path)
    assert (counts(session), data_version(session, feed)) == before
    assert caught.value.status == 400 and caught.value.code == "VALIDATION_ERROR"
    assert "nothing was written" in caught.value.message
    details = caught.value.details
    assert isinstance(details, list) and details
    for item in details:
        assert set(item) == {"line", "field", "reason"}
    return details


# ---------------------------------------------------------------- refused files


@pytest.mark.parametrize(
    "changes, field, reason",
    [
        ({"ref": ""}, "ref", "ref is required"),
        ({"ref": "  "}, "ref", "ref is required"),
        ({"eta": "2024-02-30T10:00:00Z"}, "eta", "is not a date"),
        ({"etb": "05/01/2024"}, "etb", "is not a date"),
        ({"etd": "soon"}, "etd", "is not a date"),
        ({"dwt": "82,000"}, "dwt", "is not a number"),
        ({"dwt": "inf"}, "dwt", "is not a number"),
        ({"quantity": "lots"}, "quantity", "is not a number"),
        ({"quantity": "-5"}, "quantity", "is negative"),
        ({"dwt": "-1"}, "dwt", "is negative"),
        ({"dwt": "82000.5"}, "dwt", "is not a whole number"),
        ({"dwt": "3000000000"}, "dwt", "is too large"),
        ({"vessel_imo": "9074728"}, "vessel_imo", "is not a valid IMO number"),
        ({"vessel_imo": "907472"}, "vessel_imo", "is not a valid IMO number"),
        ({"operation": "loading"}, "operation", "is not one of load, disch, bunker, husbandry"),
        ({"vessel_status": "sailing"}, "vessel_status", "is not one of expected"),
        ({"quantity_unit": "tons"}, "quantity_unit", "is not one of MT, BBL, Units"),
        ({"vessel_imo": "", "vessel_name": "TBN"}, "vessel_imo", "one of vessel_imo or vessel_name is required"),
        ({"port_unlocode": "BRSS"}, "port_unlocode", "is not a UN/LOCODE"),
        ({"port_unlocode": "BR-SSZ"}, "port_unlocode", "is not a UN/LOCODE"),
        ({"port_unlocode": "N/A"}, "port_unlocode", "port_unlocode is required"),
        ({"shipper": "A" * 201}, "shipper", "longer than 200 characters"),
    ],
)
def test_c11_bad_value_refuses_the_file_whole(session, feed, tmp_path, changes, field, reason):
    ingest_rows(session, feed, tmp_path, [row(ref="KEEP")], name="first.csv")
    kept = stored(session, feed, "KEEP")
    # The bad row comes second, after a good row that would change a stored record.
    path = write_csv(tmp_path / "bad.csv", [row(ref="KEEP", eta="2024-02-01T00:00:00Z"), row(**{"ref": "R2", **changes})])
    details = refused(session, feed, path)
    assert len(details) == 1
    assert details[0]["line"] == 3
    assert details[0]["field"] == field
    assert reason in details[0]["reason"]
    assert stored(session, feed, "KEEP") == kept


def test_c11_unknown_column_is_named_on_line_1(session, feed, tmp_path):
    details = refused(session, feed, write_csv(tmp_path / "f.csv", [{**GOOD, "colour": "red"}]))
    assert details == [{"line": 1, "field": "colour", "reason": "unknown column"}]


def test_c11_unknown_column_is_reported_with_the_rows_problems(session, feed, tmp_path):
    rows = [{**GOOD, "colour": "red"}, {**row(ref="R2", dwt="heavy"), "colour": "blue"}]
    details = refused(session, feed, write_csv(tmp_path / "f.csv", rows))
    assert [(d["line"], d["field"]) for d in details] == [(1, "colour"), (3, "dwt")]


def test_c11_missing_ref_column(session, feed, tmp_path):
    without_ref = {k: v for k, v in GOOD.items() if k != "ref"}
    details = refused(session, feed, write_csv(tmp_path / "f.csv", [without_ref]))
    assert details == [{"line": 1, "field": "ref", "reason": "required column is missing"}]


def test_c11_missing_vessel_columns(session, feed, tmp_path):
    rows = [{k: v for k, v in GOOD.items() if k not in ("vessel_imo", "vessel_name")}]
    details = refused(session, feed, write_csv(tmp_path / "f.csv", rows))
    assert [(d["line"], d["field"]) for d in details] == [(1, "vessel_imo")]


def test_c11_duplicate_ref_names_the_first_line(session, feed, tmp_path):
    rows = [row(ref="A"), row(ref="B"), row(ref="A"), row(ref="A")]
    details = refused(session, feed, write_csv(tmp_path / "f.csv", rows))
    assert [(d["line"], d["field"]) for d in details] == [(4, "ref"), (5, "ref")]
    assert all("duplicate ref 'A' (first on line 2)" == d["reason"] for d in details)


def test_c11_every_bad_row_is_reported_in_line_order(session, feed, tmp_path):
    rows = [
        row(ref="A"),
        row(ref="B", eta="yesterday", operation="lading"),
        row(ref="C"),
        row(ref="D", vessel_imo="1234568"),
        row(ref="E"),
        row(ref="F", quantity="-1"),
    ]
    details = refused(session, feed, write_csv(tmp_path / "f.csv", rows))
    assert [(d["line"], d["field"]) for d in details] == [
        (3, "eta"),
        (3, "operation"),
        (5, "vessel_imo"),
        (7, "quantity"),
    ]


def test_c11_lines_count_blank_lines_and_cells_that_span_lines(session, feed, tmp_path):
    path = tmp_path / "f.csv"
    path.write_bytes(
        b'ref,port_unlocode,vessel_name,shipper,dwt\n'
        b'\n'
        b'A1,BRSSZ,X,"multi\nline\nshipper",1\n'
        b'\n'
        b'A2,BRSSZ,Y,"say ""hi""",heavy\r\n'
        b'A3,BRSSZ,Z,,-1\n'
    )
    details = refused(session, feed, path)
    assert [(d["line"], d["field"]) for d in details] == [(7, "dwt"), (8, "dwt")]


@pytest.mark.parametrize(
    "content",
    [
        b'\xef\xbb\xbfref,port_unlocode,vessel_name,shipper\r\nA1,BRSSZ, X ,"Cargill, Inc."\r\nA2,BRSSZ,,""\r\n',
        b'ref,port_unlocode,shipper\nA1,BRSSZ,"multi\nline"\n\nA2,BRSSZ,"say ""hi"""\n',
        b"ref,port_unlocode,vessel_name\nA1,BRSSZ\nA2,BRSSZ,Y\n",  # a row with too few cells
        b"ref,ref,vessel_name\nA1,A2,Y\n",  # a repeated column name
        b"ref,port_unlocode,vessel_name\n",  # a header alone
        "ref,port_unlocode,vessel_name\nA1,BRSSZ,São Luís\n".encode("utf-8"),
    ],
)
def test_every_cell_is_read_as_the_text_in_the_file(tmp_path, content):
    """Feed files are read by Arrow's parser (categoricals for validation, C11) or,
    when it would read them differently, by pandas: the cells must be the file's text
    either way, empty cells as "", none lost or changed."""
    path = tmp_path / "f.csv"
    path.write_bytes(content)
    frame = ingest.read_feed_file(path)
    text = frame.drop(columns="_line").astype(object)
    expected = pd.read_csv(path, dtype=object, keep_default_na=False, na_filter=False, encoding="utf-8-sig")
    assert list(text.columns) == list(expected.columns)
    assert text.values.tolist() == expected.values.tolist()


def test_c11_unreadable_file_is_refused(session, feed, tmp_path):
    path = tmp_path / "feed.xlsx"
    path.write_text("not a feed")
    with pytest.raises(ValidationError, match="ends in .csv or .jsonl"):
        ingest.ingest_file(session, feed, path)
    assert counts(session) == (0, 0)


# ---------------------------------------------------------------- accepted values


@pytest.mark.parametrize(
    "text, stored_as",
    [
        ("2024-01-05T10:00:00Z", "2024-01-05T10:00:00Z"),
        ("2024-01-05T10:00:00", "2024-01-05T10:00:00Z"),  # naive: UTC (C1)
        ("2024-01-05 10:00", "2024-01-05T10:00:00Z"),
        ("2024-01-05", "2024-01-05T00:00:00Z"),
        ("2024-01-05T12:00:00+03:00", "2024-01-05T09:00:00Z"),
        ("2024-01-05T07:30:00-03:00", "2024-01-05T10:30:00Z"),
        ("2024-01-05T10:00:00.750Z", "2024-01-05T10:00:00Z"),
    ],
)
def test_c1_times_are_stored_in_utc(session, feed, tmp_path, text, stored_as):
    ingest_rows(session, feed, tmp_path, [row(eta=text)])
    assert stored(session, feed, "R1")["eta"] == stored_as


def test_c1_offsets_may_differ_within_one_file(session, feed, tmp_path):
    rows = [row(ref="A", eta="2024-01-05T12:00:00+03:00"), row(ref="B", eta="2024-01-05T09:00:00")]
    ingest_rows(session, feed, tmp_path, rows)
    assert stored(session, feed, "A")["eta"] == stored(session, feed, "B")["eta"] == "2024-01-05T09:00:00Z"


@pytest.mark.parametrize("text", ["IMO 9074729", "imo9074729", "IMO: 9074729", " 9074729 "])
def test_imo_prefix_is_accepted(session, feed, tmp_path, text):
    ingest_rows(session, feed, tmp_path, [row(vessel_imo=text)])
    record = session.scalar(select(Record))
    assert (record.vessel_imo, record.vessel_key) == ("9074729", "IMO9074729")


def test_c1_enumerations_match_case_insensitively_and_store_the_seed_spelling(session, feed, tmp_path):
    rows = [
        row(ref="A", operation="LOAD", vessel_status="Expected", quantity_unit="mt", vessel_type="bulk  CARRIER"),
        row(ref="B", operation="Disch", vessel_status="BERTHED", quantity_unit="units", vessel_type="lng carrier"),
        row(ref="C", operation=" bunker ", vessel_status="departed", quantity_unit="Bbl", vessel_type="TANKER"),
    ]
    ingest_rows(session, feed, tmp_path, rows)
    got = {ref: stored(session, feed, ref) for ref in "ABC"}
    fields = ("operation", "vessel_status", "quantity_unit", "vessel_type")
    assert [tuple(got[r][f] for f in fields) for r in "ABC"] == [
        ("load", "expected", "MT", "Bulk Carrier"),
        ("disch", "berthed", "Units", "LNG Carrier"),
        ("bunker", "departed", "BBL", "Tanker"),
    ]


def test_c1_vessel_type_is_open(session, feed, tmp_path):
    ingest_rows(session, feed, tmp_path, [row(vessel_type="  Ro-Ro  ")])
    assert stored(session, feed, "R1")["vessel_type"] == "Ro-Ro"


def test_c1_blanks_are_stored_as_null(session, feed, tmp_path):
    blanks = {
        "vessel_type": "N/A",
        "dwt": "TBC",
        "operation": "tbn",
        "commodity": "   ",
        "quantity": "n/a",
        "quantity_unit": "",
        "etb": "TBC",
        "etd": " N/A ",
        "vessel_status": "TBN",
        "shipper": "tbc",
    }
    ingest_rows(session, feed, tmp_path, [row(**blanks)])
    got = stored(session, feed, "R1")
    assert {field: got[field] for field in blanks} == dict.fromkeys(blanks)
    assert got["eta"] == "2024-01-05T10:00:00Z"


def test_vessel_name_alone_is_enough(session, feed, tmp_path):
    ingest_rows(session, feed, tmp_path, [row(vessel_imo="", vessel_name="M/V Ocean-Grace")])
    record = session.scalar(select(Record))
    assert (record.vessel_imo, record.vessel_key) == (None, "NAME:OCEANGRACE")


def test_port_and_country_names_come_from_the_directory(session, feed, tmp_path):
    rows = [
        row(ref="A", port_unlocode="brpng"),
        row(ref="B", port_name="Santos (Alemoa)", country_name="Brasil"),
    ]
    ingest_rows(session, feed, tmp_path, rows)
    a, b = stored(session, feed, "A"), stored(session, feed, "B")
    assert (a["port_unlocode"], a["port_name"], a["country_name"]) == ("BRPNG", "Paranagua", "Brazil")
    assert (b["port_name"], b["country_name"]) == ("Santos (Alemoa)", "Brasil")


def test_header_only_file_ingests_nothing(session, feed, tmp_path):
    report = ingest.ingest_file(session, feed, write_csv(tmp_path / "f.csv", [], columns=list(GOOD)))
    assert report.as_dict() == {"inserted": 0, "updated": 0, "unchanged": 0, "unresolved_commodities": 0}
    assert data_version(session, feed) == 0


# ---------------------------------------------------------------- upsert and history


def test_reingesting_the_same_file_changes_nothing(session, feed, tmp_path):
    path = write_csv(tmp_path / "f.csv", [row(ref="A"), row(ref="B", commodity="widgets")])
    first = ingest.ingest_file(session, feed, path)
    assert first.as_dict() == {"inserted": 2, "updated": 0, "unchanged": 0, "unresolved_commodities": 1}
    old = dt.datetime(2020, 1, 1, 12, 0, 0)
    session.execute(update(Record).values(updated_at=old))
    version = data_version(session, feed)

    again = ingest.ingest_file(session, feed, path)

    assert again.as_dict() == {"inserted": 0, "updated": 0, "unchanged": 2, "unresolved_commodities": 1}
    assert [stored(session, feed, r)["updated_at"] for r in "AB"] == [old, old]
    assert [stored(session, feed, r)["version"] for r in "AB"] == [1, 1]
    assert counts(session) == (2, 0)
    assert data_version(session, feed) == version


@pytest.mark.parametrize("by_ref", [ingest.BY_REF, 0], ids=["records-read-by-ref", "whole-feed-read"])
def test_a_changed_row_is_updated_and_its_previous_version_kept(session, feed, tmp_path, monkeypatch, by_ref):
    # A small file reads its feed's stored records by ref, a large one the whole feed:
    # both come to the same.
    monkeypatch.setattr(ingest, "BY_REF", by_ref)
    ingest_rows(session, feed, tmp_path, [row(ref="A"), row(ref="B")], name="v1.csv")
    old = dt.datetime(2020, 1, 1, 12, 0, 0)
    session.execute(update(Record).values(updated_at=old))
    assert data_version(session, feed) == 1

    report = ingest_rows(
        session, feed, tmp_path,
        [row(ref="A", eta="2024-01-06T22:00:00Z", vessel_status="anchored"), row(ref="B"), row(ref="C")],
        name="v2.csv",
    )

    assert report.as_dict() == {"inserted": 1, "updated": 1, "unchanged": 1, "unresolved_commodities": 0}
    assert data_version(session, feed) == 2
    a = stored(session, feed, "A")
    assert (a["eta"], a["vessel_status"], a["version"]) == ("2024-01-06T22:00:00Z", "anchored", 2)
    assert a["updated_at"] > old
    assert stored(session, feed, "B")["updated_at"] == old
    assert counts(session) == (3, 1)

    history = record_history(session, feed.id, "A")
    assert [v["version"] for v in history] == [1, 2]
    assert [v["eta"] for v in history] == ["2024-01-05T10:00:00Z", "2024-01-06T22:00:00Z"]
    assert [v["vessel_status"] for v in history] == ["expected", "anchored"]
    assert history[0]["updated_at"] == "2020-01-01T12:00:00Z"
    assert history[0]["replaced_at"] == history[1]["updated_at"]
    assert history[1]["replaced_at"] is None
    assert history[0]["commodity_leaf"] == "dry-bulk/grains/soybeans"


def test_updated_at_from_the_file_is_kept_for_new_and_changed_rows(session, feed, tmp_path):
    ingest_rows(session, feed, tmp_path, [row(updated_at="2024-01-01T06:00:00+01:00")], name="v1.csv")
    assert stored(session, feed, "R1")["updated_at"] == dt.datetime(2024, 1, 1, 5, 0, 0)
    ingest_rows(session, feed, tmp_path, [row(updated_at="2024-01-02T00:00:00Z")], name="v2.csv")
    assert stored(session, feed, "R1")["updated_at"] == dt.datetime(2024, 1, 1, 5, 0, 0)  # unchanged row
    ingest_rows(session, feed, tmp_path, [row(quantity="1", updated_at="2024-01-03")], name="v3.csv")
    assert stored(session, feed, "R1")["updated_at"] == dt.datetime(2024, 1, 3)


def test_refs_are_per_feed(session, feed, tmp_path):
    other = feeds.add_feed(session, "Other Feed", ["BRSSZ"])
    ingest_rows(session, feed, tmp_path, [row()], name="a.csv")
    report = ingest_rows(session, other, tmp_path, [row(eta="2024-03-01")], name="b.csv")
    assert report.inserted == 1
    assert stored(session, feed, "R1")["eta"] == "2024-01-05T10:00:00Z"
    assert stored(session, other, "R1")["eta"] == "2024-03-01T00:00:00Z"
    assert (data_version(session, feed), data_version(session, other)) == (1, 1)


def test_record_history_of_an_unknown_record(session, feed):
    with pytest.raises(NotFound):
        record_history(session, feed.id, "nope")


def test_eta_slips_follow_every_version(session, feed, tmp_path):
    etas = ["2024-01-05T10:00:00Z", "2024-01-06T10:00:00Z", "2024-01-06T22:00:00Z"]
    for number, eta in enumerate(etas):
        rows = [row(ref="SLIP", eta=eta), row(ref="STILL"), row(ref="LATE", eta="TBC" if number == 0 else eta)]
        ingest_rows(session, feed, tmp_path, rows, name=f"v{number}.csv")

    slips = eta_slips(session, [(feed.id, "SLIP"), (feed.id, "STILL"), (feed.id, "LATE"), (feed.id, "nope")])

    assert set(slips) == {(feed.id, "SLIP"), (feed.id, "STILL"), (feed.id, "LATE")}
    slip = slips[(feed.id, "SLIP")]
    assert [(v, eta.isoformat()) for v, eta in slip.etas] == [
        (1, "2024-01-05T10:00:00+00:00"),
        (2, "2024-01-06T10:00:00+00:00"),
        (3, "2024-01-06T22:00:00+00:00"),
    ]
    assert slip.slip_hours == 36.0
    assert slips[(feed.id, "STILL")].slip_hours == 0.0
    assert len(slips[(feed.id, "STILL")].etas) == 1
    late = slips[(feed.id, "LATE")]
    assert late.etas[0] == (1, None)
    assert late.first_eta.isoformat() == "2024-01-06T10:00:00+00:00"  # the first ETA given
    assert late.slip_hours == 12.0


# ---------------------------------------------------------------- JSON Lines


def test_jsonl_files_with_json_numbers_and_nulls(session, feed, tmp_path):
    path = tmp_path / "feed.jsonl"
    lines = [
        {**GOOD, "ref": "A", "dwt": 82000, "quantity": 65000.5, "vessel_imo": 9074729},
        {"ref": "B", "port_unlocode": "BRSSZ", "vessel_name": "Star", "dwt": None, "eta": None, "shipper": "N/A"},
    ]
    path.write_text(json.dumps(lines[0]) + "\n\n" + json.dumps(lines[1]) + "\n", encoding="utf-8")

    report = ingest.ingest_file(session, feed, path)

    assert (report.inserted, report.updated) == (2, 0)
    a, b = stored(session, feed, "A"), stored(session, feed, "B")
    assert (a["dwt"], a["quantity"], a["vessel_imo"]) == (82000, 65000.5, "9074729")
    assert (b["dwt"], b["eta"], b["shipper"], b["port_name"]) == (None, None, None, "Santos")


def test_jsonl_bad_rows_name_their_file_lines(session, feed, tmp_path):
    path = tmp_path / "feed.jsonl"
    path.write_text(
        "\n".join(
            [
                json.dumps(GOOD),
                "",
                json.dumps({**GOOD, "ref": "R2", "dwt": -3}),
                json.dumps({**GOOD, "ref": "R3", "operation": "sail"}),
            ]
        ),
        encoding="utf-8",
    )
    details = refused(session, feed, path)
    assert [(d["line"], d["field"]) for d in details] == [(3, "dwt"), (4, "operation")]


def test_jsonl_line_that_is_not_an_object(session, feed, tmp_path):
    path = tmp_path / "feed.jsonl"
    path.write_text(json.dumps(GOOD) + "\n[1, 2]\n{not json\n", encoding="utf-8")
    details = refused(session, feed, path)
    assert [(d["line"], d["field"]) for d in details] == [(2, None), (3, None)]


# ---------------------------------------------------------------- foreign formats: Santos


@pytest.fixture
def santos(session, tmp_path):
    if not SANTOS_FILE.exists():
        pytest.skip(f"{SANTOS_FILE} is not on this machine")
    target = feeds.add_feed(session, "Santos Port Lineup", ["BRSSZ"])
    report = ingest.ingest_file(session, target, SANTOS_FILE, Mapping.load(SANTOS_MAPPING))
    return target, report


def test_santos_file_ingests_with_its_mapping(session, santos):
    target, report = santos
    assert report.as_dict() == {"inserted": 311, "updated": 0, "unchanged": 0, "unresolved_commodities": 7}
    rows = session.execute(select(Record).where(Record.feed_id == target.id)).scalars().all()
    assert {r.port_unlocode for r in rows} == {"BRSSZ"}
    assert {r.port_name for r in rows} == {"Santos"}
    assert {r.operation for r in rows} == {"load", "disch", None}
    assert sum(r.operation == "load" for r in rows) == 258
    assert {r.quantity_unit for r in rows} == {"MT"}
    assert all(r.vessel_imo is None and r.vessel_key.startswith("NAME:") for r in rows)


def test_santos_keeps_accents_and_parses_both_date_forms(session, santos):
    target, _ = santos
    first = stored(session, target, "524652023")  # JAG SPARROW, the file's first row
    assert first["ship_agent"] == "AGÊNCIA MARÍTIMA ORION"
    assert first["vessel_name"] == "JAG SPARROW"
    # 04/12/2023 04:42:00 in Santos (UTC-3, the mapping's timezone) is 07:42 UTC.
    assert (first["eta"], first["operation"], first["quantity"]) == ("2023-12-04T07:42:00Z", "disch", 56262.0)
    assert first["vessel_type"] == "Tanker"
    day_only = stored(session, target, "518152023")  # arrival "28/12/2023"
    assert day_only["eta"] == "2023-12-28T03:00:00Z"
    agents = set(session.scalars(select(Record.ship_agent).where(Record.feed_id == target.id)))
    assert "CONE SUL AGENCIA DE NAVEGAÇÃO S/C LTDA." in agents


def test_santos_commodities_resolve(session, santos):
    target, _ = santos
    leaves = dict(
        session.execute(
            select(Record.commodity, Record.commodity_leaf).where(Record.feed_id == target.id).distinct()
        ).all()
    )
    assert leaves["SOJA A GRANEL"] == "dry-bulk/grains/soybeans"
    assert leaves["MILHO A GRANEL"] == "dry-bulk/grains/corn"
    assert leaves["OLEO DIESEL"] == "liquid-bulk/refined-products/diesel-gasoil"
    assert leaves["OUTROS"] is None
    assert commodities.unresolved(session) == [{"raw": "OUTROS", "count": 7}]


def test_santos_reingest_is_unchanged(session, santos):
    target, _ = santos
    again = ingest.ingest_file(session, target, SANTOS_FILE, Mapping.load(SANTOS_MAPPING))
    assert (again.inserted, again.updated, again.unchanged) == (0, 0, 311)
    assert data_version(session, target) == 1


# ---------------------------------------------------------------- bad input (issue 16, items 11-15)


@pytest.mark.parametrize("text", ["0001-01-01", "9999-12-31", "1899-12-31T23:00:00Z", "2101-01-01", "unknown", "00/00/0000"])
def test_dates_outside_the_range_of_a_lineup_are_row_errors(session, feed, tmp_path, text):
    """Issue 16.11: dates pandas cannot hold and "unknown" placeholders are bad rows,
    reported with the file's other bad rows (C10), never an OutOfBoundsDatetime."""
    path = write_csv(tmp_path / "f.csv", [row(ref="A", eta=text), row(ref="B", quantity="lots"), row(ref="C")])
    details = refused(session, feed, path)
    assert [(d["line"], d["field"]) for d in details] == [(2, "eta"), (3, "quantity")]
    assert text in details[0]["reason"]


def test_a_date_outside_the_range_with_a_mapping_timezone_is_a_row_error(session, feed, tmp_path):
    dates = {"etb": "", "etd": ""}
    path = write_csv(tmp_path / "f.csv", [row(ref="A", eta="31/12/9999", **dates), row(ref="B", eta="05/01/2024", **dates)])
    mapping = Mapping(date_format="%d/%m/%Y", timezone="America/Sao_Paulo", columns={k: k for k in GOOD})
    with pytest.raises(ValidationError) as caught:
        ingest.ingest_file(session, feed, path, mapping)
    assert [(d["line"], d["field"]) for d in caught.value.details] == [(2, "eta")]


def test_a_binary_file_named_csv_is_refused_in_one_line(session, feed, tmp_path):
    """Issue 16.12: the start of an ELF binary is no feed file: a VALIDATION_ERROR."""
    path = tmp_path / "feed.csv"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 80 + b"\n\r\x00\x00")
    with pytest.raises(ValidationError, match="not a text file") as caught:
        ingest.ingest_file(session, feed, path)
    assert caught.value.code == "VALIDATION_ERROR" and "\n" not in caught.value.message
    assert counts(session) == (0, 0)


@pytest.mark.parametrize("text", ["1e308", "12345678901234567890123456", "100000001"])
def test_a_quantity_no_cargo_has_is_refused(session, feed, tmp_path, text):
    """Issue 16.13: above 10^8 in any unit is no cargo."""
    details = refused(session, feed, write_csv(tmp_path / "f.csv", [row(quantity=text)]))
    assert details == [{"line": 2, "field": "quantity", "reason": f"{text!r} is more than 100,000,000"}]


def test_whole_quantities_are_kept_exact(session, feed, tmp_path):
    ingest_rows(session, feed, tmp_path, [row(ref="A", quantity="99999999"), row(ref="B", quantity="65000.25")])
    assert stored(session, feed, "A")["quantity"] == 99_999_999
    assert stored(session, feed, "B")["quantity"] == 65_000.25


def test_a_row_with_more_cells_than_the_header_is_named(session, feed, tmp_path):
    """Issue 16.14: a ragged row is not shifted onto the wrong fields."""
    path = tmp_path / "f.csv"
    path.write_text(
        "ref,port_unlocode,vessel_name,eta,etb,quantity,dwt,operation,commodity\n"
        "A1,BRSSZ,X,2024-01-01,,5,1,load,coal,extra1,extra2\n"
        "A2,BRSSZ,Y,2024-01-01,,5,1,load,coal\n"
        "A3,BRSSZ,Z,2024-01-01,,5,1,load,coal,extra\n",
        encoding="utf-8",
    )
    details = refused(session, feed, path)
    assert details == [
        {"line": 2, "field": None, "reason": "has 11 cells, the header has 9"},
        {"line": 4, "field": None, "reason": "has 10 cells, the header has 9"},
    ]


def test_jsonl_reports_every_bad_row_with_its_field(session, feed, tmp_path):
    """Issue 16.15: lines that are not JSON objects and rows with bad values are all
    reported, each with its field where it has one, in the words of CSV reports."""
    path = tmp_path / "feed.jsonl"
    path.write_text(
        "\n".join([
            json.dumps({**GOOD, "ref": "R1", "eta": "bad"}),
            "not json",
            "[1]",
            json.dumps({**GOOD, "ref": "R4", "remarks": "late"}),
            json.dumps({**GOOD, "ref": "R5", "shipper": {"name": "Cargill"}}),
            json.dumps({**GOOD, "ref": "R6", "dwt": -3}),
        ]),
        encoding="utf-8",
    )
    details = refused(session, feed, path)
    assert details == [
        {"line": 1, "field": "eta", "reason": "'bad' is not a date (ISO 8601 or YYYY-MM-DD)"},
        {"line": 2, "field": None, "reason": "is not JSON (Expecting value at column 1)"},
        {"line": 3, "field": None, "reason": "is not a JSON object"},
        {"line": 4, "field": "remarks", "reason": "unknown column"},
        {"line": 5, "field": "shipper", "reason": "is a JSON object, not a value"},
        {"line": 6, "field": "dwt", "reason": "'-3' is negative"},
    ]


# ---------------------------------------------------------------- foreign files (issue 18.10)


def test_semicolon_and_tab_separated_files_are_read(session, feed, tmp_path):
    for name, sep in (("semi.csv", ";"), ("tab.csv", "\t")):
        path = tmp_path / name
        path.write_text(f"ref{sep}port_unlocode{sep}vessel_name{sep}shipper\nA{sep}BRSSZ{sep}X{sep}Cargill, Inc.\n", encoding="utf-8")
        frame = ingest.read_feed_file(path)
        assert list(frame.columns) == ["ref", "port_unlocode", "vessel_name", "shipper", "_line"]
        assert frame.attrs["read_as"]["delimiter"] == sep
    assert ingest.ingest_file(session, feed, tmp_path / "tab.csv").inserted == 1


def test_a_windows_1252_file_is_read(session, feed, tmp_path):
    path = tmp_path / "latin.csv"
    path.write_bytes("ref,port_unlocode,vessel_name,shipper\nA,BRSSZ,São Luís,Raízen – Açúcar\n".encode("cp1252"))
    assert ingest.ingest_file(session, feed, path).inserted == 1
    assert stored(session, feed, "A")["shipper"] == "Raízen – Açúcar"
    assert ingest.read_feed_file(path).attrs["read_as"]["encoding"] == "cp1252"


def test_an_encoding_named_by_a_mapping_that_does_not_fit_says_which_line(session, feed, tmp_path):
    path = tmp_path / "latin.csv"
    path.write_bytes("ref,port_unlocode,vessel_name\nA,BRSSZ,X\nB,BRSSZ,São\n".encode("cp1252"))
    mapping = Mapping(encoding="utf-8", columns={"ref": "ref", "port_unlocode": "port_unlocode", "vessel_name": "vessel_name"})
    with pytest.raises(ValidationError, match=r"line 3 is not utf-8 text.*encoding") as caught:
        ingest.ingest_file(session, feed, path, mapping)
    assert "\n" not in caught.value.message


def test_a_foreign_file_without_a_mapping_says_which_option_fixes_it(session, feed):
    if not SANTOS_FILE.exists():
        pytest.skip(f"{SANTOS_FILE} is not on this machine")
    with pytest.raises(ValidationError) as caught:
        ingest.ingest_file(session, feed, SANTOS_FILE)
    assert "--mapping" in caught.value.message and "\n" not in caught.value.message
    assert {"line": 1, "field": "ship", "reason": "unknown column"} in caught.value.details


@pytest.mark.parametrize("large", [False, True], ids=["daily file", "large file"])
def test_an_ingest_writes_with_a_page_cache_for_its_size_and_gives_its_connection_back_small(tmp_path, monkeypatch, large):
    """SQLite's default 2 MiB page cache made a large ingest read the same index pages
    again and again (1,000,000 records: 21,400 rows/s, 31,600 with 256 MiB), while a
    daily file's few thousand rows are quicker with a small one (the large one's
    memory costs a new process its first touch); the connection goes back to the
    pool with the default, so that a server's pooled connections stay small."""
    from store.database.db import create_schema, make_engine, make_sessionmaker, transaction
    from store.views import upkeep

    if large:  # a file of more rows than BY_REF
        monkeypatch.setattr(ingest, "BY_REF", 0)
    engine = make_engine(f"sqlite:///{tmp_path / 'cache.db'}")
    create_schema(engine)
    sessions = make_sessionmaker(engine)
    with transaction(sessions) as session:
        default = session.execute(text("PRAGMA cache_size")).scalar_one()
        target = feeds.add_feed(session, "Santos Lineup", ["BRSSZ"])
    during = []
    refresh = upkeep.refresh_feeds
    monkeypatch.setattr(upkeep, "refresh_feeds", lambda s, ids: (
        during.append(s.execute(text("PRAGMA cache_size")).scalar_one()), refresh(s, ids))[1])
    with transaction(sessions) as session:
        report = ingest.ingest_file(session, session.merge(target), write_csv(tmp_path / "f.csv", [GOOD]))
    wanted = ingest.LARGE_CACHE_MIB if large else ingest.SMALL_CACHE_MIB
    assert report.inserted == 1 and during == [-wanted * 1024]
    with transaction(sessions) as session:
        assert session.execute(text("PRAGMA cache_size")).scalar_one() == default == -2000
    engine.dispose()


def test_text_with_tabs_backslashes_and_line_breaks_is_stored_exactly(session, feed, tmp_path):
    """New records reach PostgreSQL by COPY, whose text form escapes these characters:
    what a feed wrote is what is stored, on both back ends."""
    odd = 'Cargill\t"Agrícola"\\Santos\nBerth 2 \\N'
    ingest_rows(session, feed, tmp_path, [row(shipper=odd, receiver="\\.")])
    assert stored(session, feed, "R1")["shipper"] == odd
    assert stored(session, feed, "R1")["receiver"] == "\\."


def _record_indexes(session) -> set[str]:
    from sqlalchemy import inspect

    connection = session.connection()
    return {index["name"] for index in inspect(connection).get_indexes(Record.__tablename__, schema=None)}


def test_a_load_larger_than_the_store_builds_the_records_indexes_after_its_rows(session, feed, tmp_path, monkeypatch):
    """A store's first large load drops the records table's secondary indexes and
    builds them again after its inserts, in its transaction (a 1,000,000-record
    ingest: ~46,000 -> ~53,000 rows/s on SQLite, 40,000 -> 58,000 on PostgreSQL with
    COPY); a later, smaller batch writes into the indexes as they are. The indexes
    are there after either, and after a bulk load that rolls back."""
    from sqlalchemy import event

    monkeypatch.setattr(ingest, "BULK_LOAD", 3)
    expected = {index.name for index in Record.__table__.indexes}
    assert expected <= _record_indexes(session)
    statements = []
    engine = session.get_bind()
    listen = lambda conn, cursor, statement, *rest: statements.append(statement)  # noqa: E731
    event.listen(engine, "before_cursor_execute", listen)
    try:
        first = [row(ref=f"R{i}", vessel_imo="", vessel_name=f"Ship {i}") for i in range(5)]
        assert ingest_rows(session, feed, tmp_path, first).inserted == 5
        assert sum("DROP INDEX" in s for s in statements) == len(expected)
        assert expected <= _record_indexes(session)
        assert stored(session, feed, "R4")["vessel_name"] == "Ship 4"
        statements.clear()
        later = [row(ref=f"S{i}", vessel_imo="", vessel_name=f"Ship {i}") for i in range(4)]
        assert ingest_rows(session, feed, tmp_path, later, name="later.csv").inserted == 4
        assert not any("DROP INDEX" in s for s in statements)
    finally:
        event.remove(engine, "before_cursor_execute", listen)
    assert counts(session)[0] == 9
    # Nothing of it is kept when its transaction rolls back: the indexes included.
    session.rollback()
    assert counts(session)[0] == 0
    assert expected <= _record_indexes(session)


def test_a_new_record_notes_a_name_link_only_when_the_feed_did_not_carry_it(session, feed, tmp_path, monkeypatch):
    """Issue 19 rule 5: the change log notes an (IMO, name) link when a new served
    record makes one the feed did not carry (its views then move that name's
    name-only records); a new call of a vessel the feed already names so notes only
    its own (vessel, port) pair, so that a daily update stays small."""
    from store.normalize import name_key
    from store.views import changelog

    noted = []
    original = changelog.note_changes
    monkeypatch.setattr(changelog, "note_changes", lambda s, f, v, keys: (noted.append(set(keys)), original(s, f, v, keys)))
    ingest_rows(session, feed, tmp_path, [row(ref="A")], name="a.csv")
    key = "IMO9074729"
    assert noted[-1] == {(key, "BRSSZ"), changelog.link(key, name_key("Ocean Grace"))}
    ingest_rows(session, feed, tmp_path, [row(ref="A"), row(ref="B", port_unlocode="BRPNG")], name="b.csv")
    assert noted[-1] == {(key, "BRPNG")}
    ingest_rows(session, feed, tmp_path, [row(ref="C", vessel_name="Ocean Grace II")], name="c.csv")
    assert noted[-1] == {(key, "BRSSZ"), changelog.link(key, name_key("Ocean Grace II"))}


def test_two_ingests_of_one_feed_run_one_after_the_other(sessions, tmp_path, monkeypatch):
    """The second of two concurrent ingests into one feed compares its file with the
    first's records (it waits for the feed's lock before it reads them): a ref both
    files carry is inserted once and found unchanged the second time, instead of the
    second ingest failing on the (feed, ref) key with a read made before the first
    committed."""
    import threading

    from store.database.db import transaction

    with transaction(sessions) as session:
        feed_id = feeds.add_feed(session, "Test Feed", ["BRSSZ", "BRPNG"]).id
        ingest_rows(session, session.get(Feed, feed_id), tmp_path, [row(ref="R1")], name="v1.csv")
    first_read, release = threading.Event(), threading.Event()
    read = ingest._existing

    def paused(session, feed, refs):  # the first ingest stops after its read, holding the lock
        found = read(session, feed, refs)
        if threading.current_thread().name == "first":
            first_read.set()
            release.wait(30)
        return found

    monkeypatch.setattr(ingest, "_existing", paused)
    reports, errors = {}, []

    def run(name, rows):
        try:
            with transaction(sessions) as session:
                reports[name] = ingest_rows(session, session.get(Feed, feed_id), tmp_path, rows, name=f"{name}.csv")
        except Exception as exc:  # noqa: BLE001 - the test reports it
            errors.append(exc)

    first = threading.Thread(target=run, name="first", args=("first", [row(ref="R1", vessel_status="anchored"), row(ref="R3")]))
    second = threading.Thread(target=run, name="second", args=("second", [row(ref="R3"), row(ref="R4")]))
    first.start()
    assert first_read.wait(30)
    second.start()
    second.join(0.5)  # the second waits for the feed's lock meanwhile
    release.set()
    first.join(30)
    second.join(30)
    assert not errors, errors
    assert reports["first"].as_dict()["inserted"] == 1 and reports["first"].as_dict()["updated"] == 1
    assert reports["second"].as_dict() == {"inserted": 1, "updated": 0, "unchanged": 1, "unresolved_commodities": 0}
    with transaction(sessions) as session:
        refs = session.scalars(select(Record.ref).where(Record.feed_id == feed_id).order_by(Record.ref)).all()
        assert refs == ["R1", "R3", "R4"]
        assert session.scalar(select(Feed.data_version).where(Feed.id == feed_id)) == 3
