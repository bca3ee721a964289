"""Issue 19, amending C2.2: the merge resolves vessel identity (rule 1) and commodity
specificity (rule 2) among the records it merges; `merge=by_source` is unchanged
(rule 3). One worked example per rule; each fails without it."""

from __future__ import annotations

from merge_records import FEED_B, FEED_C, day, frame, record

from store.merging.merge import merge, merge_groups
from store.merging.resolve import Identities

HARMONY = {"vessel_key": "IMO9345934", "vessel_imo": "9345934", "vessel_name": "HARMONY PACIFIC"}
HARMONY_BY_NAME = {"vessel_key": "NAME:HARMONY PACIFIC", "vessel_imo": None, "vessel_name": "Harmony Pacific"}
WHEAT = {
    "commodity_key": "dry-bulk/grains/wheat", "commodity": "wheat", "commodity_normalized": "Wheat",
    "commodity_normalized_subgroup": "Grains", "commodity_normalized_group": "Dry Bulk",
}
FINES = {
    "commodity_key": "dry-bulk/iron-ore/iron-ore-fines", "commodity": "IOF", "commodity_normalized": "Iron Ore Fines",
    "commodity_normalized_subgroup": "Iron Ore", "commodity_normalized_group": "Dry Bulk",
}
PELLETS = {
    **FINES, "commodity_key": "dry-bulk/iron-ore/iron-ore-pellets", "commodity": "pellets",
    "commodity_normalized": "Iron Ore Pellets",
}
IRON_ORE = {
    **FINES, "commodity_key": "dry-bulk/iron-ore/iron-ore-unspecified", "commodity": "iron ore",
    "commodity_normalized": "Iron Ore (Unspecified)",
}


def grouping(*records: dict, mode: str = "all", identities=None) -> list[set[str]]:
    _, membership = merge_groups(frame(*records), mode, identities)
    groups: dict[str, set[str]] = {}
    for r, row_id in zip(records, membership):
        groups.setdefault(row_id, set()).add(r["ref"])
    return sorted(groups.values(), key=min)


# Rule 1: vessel identity ---------------------------------------------------------------


def test_rule_1_a_name_only_record_is_merged_as_the_one_imo_its_name_has():
    rows = merge(frame(
        record("a1", port_unlocode="BRSSZ", eta=day(0), **HARMONY, **WHEAT),
        record("b1", source_id=FEED_B, port_unlocode="BRSSZ", eta=day(0.25), quantity=60000.0, **HARMONY_BY_NAME, **WHEAT),
    ))
    assert len(rows) == 1
    row = rows.iloc[0]
    assert row["vessel_key"] == "IMO9345934" and row["vessel_imo"] == "9345934" and row["quantity"] == 60000.0
    assert row["source_name"] == "Alpha Lineups;Bravo Port Data"


def test_rule_1_the_imo_may_come_from_a_record_at_another_port():
    # The name maps to one IMO among the records merged, wherever that record is.
    rows = merge(frame(
        record("a1", port_unlocode="NLRTM", **HARMONY),
        record("b1", source_id=FEED_B, port_unlocode="BRSSZ", **HARMONY_BY_NAME, **WHEAT),
    ))
    assert set(rows["vessel_key"]) == {"IMO9345934"}


def test_rule_1_a_name_that_two_imos_carry_stays_a_name():
    twin = {**HARMONY, "vessel_key": "IMO9074729", "vessel_imo": "9074729"}
    assert grouping(
        record("a1", **HARMONY),
        record("c1", source_id=FEED_C, port_unlocode="BEANR", **twin),
        record("b1", source_id=FEED_B, **HARMONY_BY_NAME),
    ) == [{"a1"}, {"b1"}, {"c1"}]


def test_rule_1_nothing_is_learned_from_records_not_merged():
    # Identities passed in stand for the view's records; a name-only record alone
    # has no IMO, and an IMO outside the input (another buyer's feed) never reaches it.
    alone = record("b1", source_id=FEED_B, **HARMONY_BY_NAME)
    assert set(merge(frame(alone))["vessel_key"]) == {"NAME:HARMONY PACIFIC"}
    known = Identities.of_triples([("MV Harmony Pacific", "IMO9345934", "Alpha Lineups")])
    assert set(merge(frame(alone), identities=known)["vessel_key"]) == {"IMO9345934"}


def test_rule_1_records_with_a_blank_commodity_teach_no_imo():
    assert grouping(
        record("a1", port_unlocode="BEANR", commodity=None, commodity_key=None, **HARMONY),
        record("b1", source_id=FEED_B, **HARMONY_BY_NAME),
    ) == [{"a1"}, {"b1"}]
    assert set(merge(frame(
        record("a1", port_unlocode="BEANR", commodity=None, commodity_key=None, **HARMONY),
        record("b1", source_id=FEED_B, **HARMONY_BY_NAME),
    ))["vessel_key"]) == {"NAME:HARMONY PACIFIC"}


def test_rule_3_by_source_does_not_resolve_vessels():
    rows = merge(frame(record("a1", **HARMONY), record("a2", **HARMONY_BY_NAME)), "by_source")
    assert sorted(rows["vessel_key"]) == ["IMO9345934", "NAME:HARMONY PACIFIC"]


# Rule 2: commodity specificity ------------------------------------------------------------


def test_rule_2_an_unspecified_record_joins_the_one_specific_leaf_and_the_row_shows_it():
    rows = merge(frame(
        record("a1", eta=day(0), updated_at="2024-02-01T00:00:00Z", **FINES),
        record("b1", source_id=FEED_B, eta=day(1), updated_at="2024-02-05T00:00:00Z", **IRON_ORE),
    ))
    assert len(rows) == 1
    row = rows.iloc[0]
    # b1 is the latest record, yet the row names the specific leaf.
    assert row["commodity_key"] == "dry-bulk/iron-ore/iron-ore-fines"
    assert row["commodity_normalized"] == "Iron Ore Fines" and row["commodity"] == "iron ore"


def test_rule_2_with_two_specific_candidates_the_unspecified_record_stays_alone():
    assert grouping(
        record("a1", eta=day(0), **FINES),
        record("c1", source_id=FEED_C, eta=day(2), **PELLETS),
        record("b1", source_id=FEED_B, eta=day(1), **IRON_ORE),
    ) == [{"a1"}, {"b1"}, {"c1"}]


def test_rule_2_two_specific_leaves_never_merge():
    assert grouping(record("a1", eta=day(0), **FINES), record("c1", source_id=FEED_C, eta=day(0), **PELLETS)) == [
        {"a1"}, {"c1"}
    ]


def test_rule_2_the_candidate_must_be_within_the_window_at_the_same_vessel_and_port():
    assert grouping(record("a1", eta=day(0), **FINES), record("b1", source_id=FEED_B, eta=day(7, 7), **IRON_ORE)) == [
        {"a1"}, {"b1"}
    ]
    assert grouping(record("a1", eta=day(0), **FINES), record("b1", source_id=FEED_B, eta=day(7), **IRON_ORE)) == [
        {"a1", "b1"}
    ]
    assert grouping(
        record("a1", eta=day(0), **FINES), record("b1", source_id=FEED_B, port_unlocode="BEANR", eta=day(0), **IRON_ORE)
    ) == [{"a1"}, {"b1"}]


def test_rule_2_a_far_specific_record_is_no_candidate():
    # Pellets 10 days away are not among b1's candidates: b1 joins the fines.
    assert grouping(
        record("a1", eta=day(0), **FINES),
        record("b1", source_id=FEED_B, eta=day(1), **IRON_ORE),
        record("c1", source_id=FEED_C, eta=day(11), **PELLETS),
    ) == [{"a1", "b1"}, {"c1"}]


def test_rules_1_and_2_together_the_dawn_cape_case():
    dawn = {"vessel_key": "IMO9348247", "vessel_imo": "9348247", "vessel_name": "MV DAWN CAPE"}
    dawn_by_name = {"vessel_key": "NAME:DAWN CAPE", "vessel_imo": None, "vessel_name": "Dawn Cape"}
    assert grouping(
        record("a1", port_unlocode="AUPHE", eta=day(0), **dawn, **IRON_ORE),
        record("b1", source_id=FEED_B, port_unlocode="AUPHE", eta=day(0.5), **dawn_by_name, **FINES),
    ) == [{"a1", "b1"}]


def test_rule_3_by_source_does_not_resolve_commodities():
    assert grouping(record("a1", eta=day(0), **FINES), record("a2", eta=day(1), **IRON_ORE), mode="by_source") == [
        {"a1"}, {"a2"}
    ]


def test_rule_5_ids_are_deterministic_and_follow_the_resolved_key():
    records = [record("a1", **HARMONY), record("b1", source_id=FEED_B, **HARMONY_BY_NAME)]
    first = merge(frame(*records))["id"].tolist()
    assert merge(frame(*reversed(records)))["id"].tolist() == first
    assert merge(frame(record("a1", **HARMONY)))["id"].tolist() == first  # same key, anchor, parties
