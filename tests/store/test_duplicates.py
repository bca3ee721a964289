"""The likely-duplicate report's causes (issue 19, `store.merging.duplicates`) on
merged rows: a cause names what kept two rows apart."""

from __future__ import annotations

from merge_records import FEED_B, FEED_C, day, frame, record
from test_merge_resolve import FINES, HARMONY, HARMONY_BY_NAME, IRON_ORE, PELLETS

from store.merging.duplicates import counts, likely_duplicates
from store.merging.merge import merge


def test_a_name_only_row_the_merge_took_as_the_imo_is_not_counted_as_imo_missing():
    # Rule 1 took b1 as IMO 9345934 (its row's key says so); two specific leaves
    # keep it apart (rule 2), which is what the pair's cause must say.
    rows = merge(frame(
        record("a1", port_unlocode="BRSSZ", eta=day(0), **HARMONY, **FINES),
        record("b1", source_id=FEED_B, port_unlocode="BRSSZ", eta=day(0.5), **HARMONY_BY_NAME, **PELLETS),
    ))
    assert set(rows["vessel_key"]) == {"IMO9345934"} and len(rows) == 2
    assert counts(rows)["IMO missing"] == 0 and counts(rows)["other"] == 1
    assert all("IMO missing" not in why for why in likely_duplicates(rows).values())


def test_an_unspecified_name_only_row_with_two_candidates_is_less_specific_not_imo_missing():
    rows = merge(frame(
        record("a1", port_unlocode="BRSSZ", eta=day(0), **HARMONY, **FINES),
        record("c1", source_id=FEED_C, port_unlocode="BRSSZ", eta=day(1), **HARMONY, **PELLETS),
        record("b1", source_id=FEED_B, port_unlocode="BRSSZ", eta=day(0.5), **HARMONY_BY_NAME, **IRON_ORE),
    ))
    assert len(rows) == 3
    found = counts(rows)
    assert found["IMO missing"] == 0 and found["commodity less specific"] == 2 and found["other"] == 1


def test_a_name_only_row_kept_apart_from_its_imo_is_imo_missing():
    # Without the vessel key (rows as a page may give them), the rows alone decide.
    rows = merge(frame(
        record("a1", port_unlocode="BRSSZ", eta=day(0), **HARMONY, **FINES),
        record("b1", source_id=FEED_B, port_unlocode="BRSSZ", eta=day(0.5), **HARMONY_BY_NAME, **PELLETS),
    )).drop(columns=["vessel_key"])
    assert counts(rows)["IMO missing"] == 1
