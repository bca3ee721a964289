"""The merge engine (contract C2), one worked example per rule; tests are named after
the clause they check."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from merge_records import FEED_A, FEED_B, FEED_C, day, frame, record

from store.fields import RECORD_FIELDS
from store.merging.merge import EXTRA_COLUMNS, merge, merge_groups, normalize_blanks
from store.normalize import vessel_key


def one(rows: pd.DataFrame) -> pd.Series:
    assert len(rows) == 1, rows
    return rows.iloc[0]


def grouping(*records: dict, mode: str = "all") -> list[set[str]]:
    """The refs of each merged row, as sets, sorted by their smallest ref."""
    _, membership = merge_groups(frame(*records), mode)
    groups: dict[str, set[str]] = {}
    for r, row_id in zip(records, membership):
        groups.setdefault(row_id, set()).add(r["ref"])
    return sorted(groups.values(), key=min)


def row_id(*records: dict, mode: str = "all") -> str:
    return one(merge(frame(*records), mode))["id"]


# C2.2 merge key -----------------------------------------------------------------------


def test_c2_2_vessel_names_that_normalize_alike_merge():
    key = vessel_key(None, "M/V Ocean  Grace.")
    assert key == vessel_key(None, "  ocean grace ") == "NAME:OCEAN GRACE"
    rows = merge(
        frame(
            record("a1", vessel_key=key, vessel_imo=None, vessel_name="M/V Ocean  Grace."),
            record("b1", source_id=FEED_B, vessel_key=key, vessel_imo=None, vessel_name="ocean grace"),
        )
    )
    assert one(rows)["_members"] == 2


def test_c2_2_imo_in_one_feed_and_only_a_name_in_another_merge_only_when_the_name_is_that_imos():
    # Issue 19 rule 1: b1's name is a1's, so b1 is IMO 9074729; under another name it
    # is another vessel, and under by_source (rule 3) feeds never meet.
    named = record("b1", source_id=FEED_B, vessel_key="NAME:OCEAN GRACE", vessel_imo=None)
    assert grouping(record("a1", vessel_key="IMO9074729"), named) == [{"a1", "b1"}]
    other = dict(named, vessel_key="NAME:OCEAN GRACIOUS", vessel_name="OCEAN GRACIOUS")
    assert grouping(record("a1", vessel_key="IMO9074729"), other) == [{"a1"}, {"b1"}]
    assert grouping(record("a1", vessel_key="IMO9074729"), named, mode="by_source") == [{"a1"}, {"b1"}]


def test_c2_2_another_port_or_commodity_key_is_another_call():
    assert grouping(
        record("a1"),
        record("a2", port_unlocode="BEANR"),
        record("a3", commodity_key="raw:soya beans", commodity="soya beans"),
    ) == [{"a1"}, {"a2"}, {"a3"}]


# C2.3 anchor --------------------------------------------------------------------------


def test_c2_3_anchor_falls_back_from_eta_to_etb_to_etd():
    # b1's anchor is its etb (day 6), c1's its etd (day 12): a chain 0 → 6 → 12.
    assert grouping(
        record("a1", eta=day(0)),
        record("b1", eta=None, etb=day(6), etd=day(30)),
        record("c1", eta=None, etb=None, etd=day(12)),
    ) == [{"a1", "b1", "c1"}]


def test_c2_3_eta_wins_over_an_earlier_etb():
    # d1's etb is on day 1, but its anchor is its eta, day 20.
    assert grouping(record("a1", eta=day(0)), record("d1", eta=day(20), etb=day(1))) == [{"a1"}, {"d1"}]


def test_c2_3_a_record_without_any_date_stays_alone():
    dateless = dict(eta=None, etb=None, etd=None)
    assert grouping(
        record("a1"), record("a2", **dateless), record("b1", source_id=FEED_B, **dateless)
    ) == [{"a1"}, {"a2"}, {"b1"}]


# C2.4 window and counterparties -------------------------------------------------------


def test_c2_4_a_chain_longer_than_7_days_end_to_end_stays_one_group():
    assert grouping(*(record(f"a{i}", eta=day(6 * i)) for i in range(5))) == [
        {"a0", "a1", "a2", "a3", "a4"}
    ]


def test_c2_4_a_gap_of_exactly_7_days_joins():
    assert grouping(record("a1", eta="2024-03-01T06:00:00Z"), record("a2", eta="2024-03-08T06:00:00Z")) == [
        {"a1", "a2"}
    ]


def test_c2_4_a_gap_of_7_days_and_1_second_splits():
    assert grouping(record("a1", eta="2024-03-01T06:00:00Z"), record("a2", eta="2024-03-08T06:00:01Z")) == [
        {"a1"},
        {"a2"},
    ]


def test_c2_4_records_whose_counterparties_disagree_split():
    assert grouping(
        record("a1", shipper="Acme Trading"),
        record("b1", source_id=FEED_B, shipper="Beta Commodities"),
        record("c1", source_id=FEED_C, receiver="Gamma Power"),
    ) == [{"a1", "c1"}, {"b1"}]


@pytest.mark.parametrize("field", ["shipper", "receiver", "charterer"])
def test_c2_4_each_counterparty_field_splits(field):
    assert grouping(record("a1", **{field: "Acme"}), record("b1", source_id=FEED_B, **{field: "Beta"})) == [
        {"a1"},
        {"b1"},
    ]


def test_c2_4_a_blank_counterparty_joins_the_group_with_the_latest_anchor():
    # c1 fits both groups (no shipper of its own); a2 on day 2 is the latest anchor.
    assert grouping(
        record("a1", eta=day(0), shipper="Acme"),
        record("a2", eta=day(2), shipper="Beta"),
        record("c1", source_id=FEED_C, eta=day(5), shipper=None),
    ) == [{"a1"}, {"a2", "c1"}]


def test_c2_4_a_group_out_of_the_window_does_not_qualify():
    assert grouping(
        record("a1", eta=day(0), shipper="Acme"),
        record("a2", eta=day(9), shipper="Beta"),
        record("c1", eta=day(3), shipper=None),
    ) == [{"a1", "c1"}, {"a2"}]


def test_c2_4_counterparties_compare_ignoring_case_and_whitespace():
    rows = merge(
        frame(
            record("a1", shipper="ACME  Trading", updated_at="2024-02-01T00:00:00Z"),
            record("b1", source_id=FEED_B, shipper=" acme trading", updated_at="2024-02-02T00:00:00Z"),
        )
    )
    assert one(rows)["shipper"] == " acme trading"  # the latest record's spelling


# C2.5 values --------------------------------------------------------------------------


def test_c2_5_latest_updated_non_blank_value_wins_and_blanks_are_skipped():
    raw = frame(
        record("a1", updated_at=day(-3), vessel_status="expected", quantity=50000.0, berth_terminal="Berth 5"),
        record("b1", source_id=FEED_B, updated_at=day(-2), vessel_status="anchored", berth_terminal="N/A"),
        record("c1", source_id=FEED_C, updated_at=day(-1), vessel_status=" tbc ", ship_agent="TBN"),
    )
    row = one(merge(normalize_blanks(raw)))
    assert row["vessel_status"] == "anchored"  # c1 is newer but says TBC
    assert row["quantity"] == 50000.0  # only a1 has one
    assert row["berth_terminal"] == "Berth 5"
    assert row["ship_agent"] is None  # every value blank


def test_c2_5_equal_updated_at_ties_go_to_source_id_then_ref():
    same = "2024-02-10T00:00:00Z"
    rows = merge(
        frame(
            record("z9", source_id=FEED_B, updated_at=same, berth_terminal="from B"),
            record("b2", source_id=FEED_A, updated_at=same, berth_terminal="from A, ref b2"),
            record("a7", source_id=FEED_A, updated_at=same, berth_terminal="from A, ref a7", eta=day(1)),
        )
    )
    assert one(rows)["berth_terminal"] == "from A, ref a7"


def test_c2_5_sources_are_joined_sorted_each_on_its_own_and_deduplicated():
    rows = merge(
        frame(
            record("a1", source_id=FEED_A, source_name="Zulu Data"),
            record("a2", source_id=FEED_A, source_name="Zulu Data", eta=day(1)),
            record("b1", source_id=FEED_B, source_name="Alpha Ports"),
        )
    )
    row = one(rows)
    assert row["source_id"] == f"{FEED_A};{FEED_B}"
    assert row["source_name"] == "Alpha Ports;Zulu Data"


def test_c2_5_source_lists_of_many_feeds_are_joined_the_same_way():
    feeds = [f"{i:08x}-0000-4000-8000-000000000000" for i in range(70)]
    records = [record(f"r{i}", source_id=feed, source_name=f"Feed {69 - i:02d}") for i, feed in enumerate(feeds)]
    records.append(record("other", source_id=feeds[0], source_name="Feed 69", eta=day(30)))
    rows = merge(frame(*records)).sort_values("_members")
    assert rows["source_id"].tolist() == [feeds[0], ";".join(sorted(feeds))]
    assert rows["source_name"].iloc[1] == ";".join(f"Feed {i:02d}" for i in range(70))


def test_c2_5_created_at_is_the_earliest_and_updated_at_the_latest():
    row = one(
        merge(
            frame(
                record("a1", created_at=day(-9), updated_at=day(-2)),
                record("b1", source_id=FEED_B, created_at=day(-5), updated_at=day(-1)),
            )
        )
    )
    assert row["created_at"] == pd.Timestamp(day(-9))
    assert row["updated_at"] == pd.Timestamp(day(-1))


def test_c2_5_combined_date_is_recomputed_from_the_merged_dates():
    # eta comes from a1 (newer), etb only from b1: combined is b1's earlier etb.
    row = one(
        merge(
            frame(
                record("a1", eta=day(3), etb=None, updated_at=day(-1)),
                record("b1", source_id=FEED_B, eta=None, etb=day(1), updated_at=day(-5)),
            )
        )
    )
    assert (row["eta"], row["etb"]) == (pd.Timestamp(day(3)), pd.Timestamp(day(1)))
    assert row["combined_date"] == pd.Timestamp(day(1))
    assert row["_span_end"] == pd.Timestamp(day(3))


# C2.6 by_source -----------------------------------------------------------------------


def test_c2_6_by_source_keeps_one_row_per_feed():
    records = [record("a1"), record("a2", eta=day(2)), record("b1", source_id=FEED_B, eta=day(1))]
    assert grouping(*records) == [{"a1", "a2", "b1"}]
    rows = merge(frame(*records), "by_source")
    assert sorted(rows["source_id"]) == [FEED_A, FEED_B]
    assert grouping(*records, mode="by_source") == [{"a1", "a2"}, {"b1"}]


# C2.7 id ------------------------------------------------------------------------------


def test_c2_7_id_is_deterministic_url_safe_and_not_a_uuid():
    records = [record("a1"), record("b1", source_id=FEED_B)]
    first, second = row_id(*records), row_id(*reversed(records))
    assert first == second
    assert re.fullmatch(r"[a-z2-7]{24}", first)  # URL-safe, never a C9 formula prefix


def test_c2_7_id_changes_when_the_shipper_changes():
    assert row_id(record("a1", shipper="Acme")) != row_id(record("a1", shipper="Beta"))


def test_c2_7_id_ignores_the_spelling_of_a_counterparty():
    assert row_id(record("a1", shipper="Acme  Trading")) == row_id(record("a1", shipper="ACME trading"))


def test_c2_7_id_changes_when_the_anchor_moves_by_a_minute_not_by_seconds():
    base = row_id(record("a1", eta="2024-03-01T06:00:00Z"))
    assert row_id(record("a1", eta="2024-03-01T06:01:00Z")) != base
    assert row_id(record("a1", eta="2024-03-01T06:00:59Z")) == base


def test_c2_7_id_stays_when_quantity_or_status_changes():
    base = row_id(record("a1", quantity=1000.0))
    assert row_id(record("a1", quantity=2000.0, vessel_status="berthed")) == base


def test_c2_7_id_depends_on_mode_and_under_by_source_on_the_feed():
    assert row_id(record("a1"), mode="all") != row_id(record("a1"), mode="by_source")
    assert row_id(record("a1"), mode="by_source") != row_id(record("a1", source_id=FEED_B), mode="by_source")


def test_c2_7_dateless_records_of_one_key_get_distinct_stable_ids():
    dateless = dict(eta=None, etb=None, etd=None)
    rows = merge(frame(record("a1", **dateless), record("a2", **dateless)))
    assert rows["id"].is_unique and len(rows) == 2
    assert set(rows["id"]) == set(merge(frame(record("a2", **dateless), record("a1", **dateless)))["id"])


# Shape, membership, blanks ------------------------------------------------------------


def test_output_has_the_c1_columns_in_order_then_the_internal_ones():
    rows = merge(frame(record("a1")))
    assert tuple(rows.columns) == (*RECORD_FIELDS, *EXTRA_COLUMNS)
    assert str(rows["eta"].dtype) == "datetime64[ns, UTC]"
    assert str(rows["dwt"].dtype) == "Int64"
    assert rows["shipper"].dtype == object


def test_pandas_string_and_microsecond_columns_merge_the_same():
    objects = frame(record("a1", shipper="Acme"), record("b1", source_id=FEED_B, eta=day(3), berth_terminal="B"))
    typed = objects.copy()
    for name in typed.columns:
        if typed[name].dtype == object:
            typed[name] = typed[name].astype("str")
        elif str(typed[name].dtype).startswith("datetime"):
            typed[name] = typed[name].astype("datetime64[us, UTC]")
    pd.testing.assert_frame_equal(merge(objects), merge(typed))


def test_c1_records_with_a_blank_commodity_are_left_out():
    rows, membership = merge_groups(frame(record("a1"), record("a2", commodity=None)))
    assert one(rows)["_members"] == 1
    assert membership.tolist() == [rows["id"][0], None]


def test_merge_groups_names_the_row_of_every_record():
    records = frame(record("a1"), record("b1", source_id=FEED_B), record("a2", eta=day(30)))
    records.index = [10, 20, 30]
    rows, membership = merge_groups(records)
    assert list(membership.index) == [10, 20, 30]
    assert membership[10] == membership[20] != membership[30]
    assert set(membership) == set(rows["id"])


def test_normalize_blanks_turns_every_c1_blank_into_none():
    raw = frame(record("a1", shipper="  ", receiver="n/a", charterer="TBN", operator=" Tbc", ship_agent="Agent"))
    clean = normalize_blanks(raw)
    assert clean.loc[0, ["shipper", "receiver", "charterer", "operator"]].isna().all()
    assert clean.loc[0, "ship_agent"] == "Agent"


def test_empty_input_gives_no_rows():
    rows = merge(frame())
    assert rows.empty and tuple(rows.columns) == (*RECORD_FIELDS, *EXTRA_COLUMNS)


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError):
        merge(frame(record("a1")), "per_feed")
