"""Provenance of merged rows (store.merging.explain): members, per-field sources, disagreements."""

from __future__ import annotations

import json

import pytest
from merge_records import FEED_A, FEED_B, FEED_C, day, frame, record

from store.merging.explain import RULES, explain
from store.fields import RECORD_FIELDS
from store.merging.merge import merge


@pytest.fixture
def records():
    """Three feeds report one call; a fourth record is another call."""
    return frame(
        record("a1", eta=day(0), quantity=50000.0, vessel_status="expected", updated_at=day(-3), shipper="Acme"),
        record(
            "b1",
            source_id=FEED_B,
            eta=day(2),
            quantity=52000.0,
            vessel_status="anchored",
            updated_at=day(-1),
            shipper="ACME ",
            berth_terminal=None,
        ),
        record("c1", source_id=FEED_C, eta=day(0, hour=12), updated_at=day(-2), berth_terminal="Berth 7"),
        record("z1", eta=day(30), updated_at=day(-1)),
    )


def the_row(records):
    """The merged row of a1, b1 and c1."""
    rows = merge(records)
    return rows[rows["_members"] == 3].iloc[0]


def test_explain_names_the_records_in_precedence(records):
    row = the_row(records)
    result = explain(row["id"], records)
    assert result["id"] == row["id"] and result["merge"] == "all"
    assert [r["ref"] for r in result["records"]] == ["b1", "c1", "a1"]  # latest update first
    assert result["records"][0] == {
        "source_id": FEED_B,
        "source_name": "Bravo Port Data",
        "ref": "b1",
        "created_at": "2024-02-01T00:00:00Z",
        "updated_at": day(-1),
    }


def test_explain_says_which_record_gave_each_field(records):
    fields = explain(the_row(records)["id"], records)["fields"]
    assert set(fields) == set(RECORD_FIELDS)
    assert fields["quantity"] == {
        "value": 52000.0,
        "rule": RULES["picked"],
        "supplied_by": [{"ref": "b1", "source_id": FEED_B}],
    }
    assert fields["berth_terminal"]["supplied_by"] == [{"ref": "c1", "source_id": FEED_C}]
    assert fields["charterer"] == {"value": None, "rule": RULES["picked"], "supplied_by": []}
    assert [s["ref"] for s in fields["source_id"]["supplied_by"]] == ["b1", "c1", "a1"]
    assert fields["combined_date"]["value"] == day(2)  # the merged eta is b1's
    assert fields["combined_date"]["supplied_by"] == [{"ref": "b1", "source_id": FEED_B}]


def test_explain_values_are_the_merged_rows_values(records):
    row = the_row(records)
    fields = explain(row["id"], records)["fields"]
    assert fields["id"]["value"] == row["id"]
    assert fields["source_name"]["value"] == row["source_name"]
    assert fields["eta"]["value"] == day(2)


def test_explain_lists_disagreements_between_feeds(records):
    found = {d["field"]: d["values"] for d in explain(the_row(records)["id"], records)["disagreements"]}
    assert set(found) == {"quantity", "vessel_status", "eta"}  # shipper differs only in spelling
    assert found["quantity"] == [
        {"value": 52000.0, "records": [{"ref": "b1", "source_id": FEED_B, "source_name": "Bravo Port Data"}]},
        {"value": 50000.0, "records": [{"ref": "a1", "source_id": FEED_A, "source_name": "Alpha Lineups"}]},
    ]
    assert [v["value"] for v in found["eta"]] == [day(2), day(0, hour=12), day(0)]


def test_etas_within_24_hours_are_no_disagreement(records):
    records = records[records["ref"] != "b1"]
    row = merge(records).query("_members == 2").iloc[0]
    assert "eta" not in {d["field"] for d in explain(row["id"], records)["disagreements"]}


def test_explain_is_json_serialisable(records):
    result = explain(the_row(records)["id"], records)
    assert json.loads(json.dumps(result)) == result


def test_explain_of_an_unknown_id_is_none(records):
    assert explain("no-such-row", records) is None


def test_explain_under_by_source(records):
    rows = merge(records, "by_source")
    row = rows[rows["source_id"] == FEED_B].iloc[0]
    result = explain(row["id"], records, "by_source")
    assert [r["ref"] for r in result["records"]] == ["b1"] and result["disagreements"] == []
    assert explain(row["id"], records, "all") is None


def test_explain_over_only_the_rows_key_gives_the_same_answer(records):
    row = the_row(records)
    same_key = records[
        (records["vessel_key"] == row["vessel_key"])
        & (records["port_unlocode"] == row["port_unlocode"])
        & (records["commodity_key"] == row["commodity_key"])
    ]
    assert explain(row["id"], same_key) == explain(row["id"], records)


def test_rules_say_what_they_do_without_clause_numbers():
    """Issue 18.2: buyers read these in the explorer and the provenance endpoint."""
    import re

    assert all(rule and not re.search(r"\bC\d", rule) for rule in RULES.values())
