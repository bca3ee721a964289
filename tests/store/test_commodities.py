"""Operators' commodity work (C6): unresolved strings and mappings, on SQLite and
PostgreSQL."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from sqlalchemy import select

from store.intake import feeds, ingest

from store.intake import commodities
from store.errors import ValidationError
from store.database.schema import CommodityMapping, Feed, Record


def write_feed(path: Path, commodities_by_ref: dict[str, str]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["ref", "port_unlocode", "vessel_name", "commodity"])
        for ref, raw in commodities_by_ref.items():
            writer.writerow([ref, "BRSSZ", f"Vessel {ref}", raw])
    return path


@pytest.fixture
def feed(session, tmp_path):
    feed = feeds.add_feed(session, "Test Feed", ["BRSSZ"])
    path = write_feed(
        tmp_path / "first.csv",
        {"1": "Widgets", "2": "Widgets", "3": "WIDGETS!", "4": "gizmo", "5": "Soybeans", "6": "N/A"},
    )
    report = ingest.ingest_file(session, feed, path)
    assert report.unresolved_commodities == 4
    return feed


def leaves(session) -> dict[str, str | None]:
    return dict(session.execute(select(Record.ref, Record.commodity_leaf)).all())


def test_c6_unresolved_lists_raw_strings_with_counts(session, feed):
    assert commodities.unresolved(session) == [
        {"raw": "Widgets", "count": 2},
        {"raw": "WIDGETS!", "count": 1},
        {"raw": "gizmo", "count": 1},
    ]


def test_c6_map_resolves_stored_records_at_once(session, feed):
    version = session.scalar(select(Feed.data_version).where(Feed.id == feed.id))

    result = commodities.map_commodity(session, " widgets ", "Bagged Cargo")

    assert result["raw"] == "widgets"
    assert result["leaf"] == "Bagged Cargo"
    assert result["records_resolved"] == 3  # case and punctuation ignored
    assert leaves(session) == {
        "1": "general-cargo/breakbulk/bagged-cargo",
        "2": "general-cargo/breakbulk/bagged-cargo",
        "3": "general-cargo/breakbulk/bagged-cargo",
        "4": None,
        "5": "dry-bulk/grains/soybeans",
        "6": None,
    }
    assert commodities.unresolved(session) == [{"raw": "gizmo", "count": 1}]
    assert session.scalar(select(Feed.data_version).where(Feed.id == feed.id)) == version + 1


def test_c6_a_mapping_applies_to_the_next_ingest(session, feed, tmp_path):
    commodities.map_commodity(session, "gizmo", "general-cargo/breakbulk/project-cargo")
    other = feeds.add_feed(session, "Other Feed", ["BRSSZ"])

    report = ingest.ingest_file(session, other, write_feed(tmp_path / "next.csv", {"9": "Gizmo.", "10": "doohickey"}))

    assert report.unresolved_commodities == 1
    rows = dict(session.execute(select(Record.ref, Record.commodity_leaf).where(Record.feed_id == other.id)).all())
    assert rows == {"9": "general-cargo/breakbulk/project-cargo", "10": None}


def test_c6_remapping_replaces_the_leaf(session, feed):
    commodities.map_commodity(session, "gizmo", "Bagged Cargo")
    result = commodities.map_commodity(session, "GIZMO", "Project Cargo")
    assert result["records_resolved"] == 1
    assert leaves(session)["4"] == "general-cargo/breakbulk/project-cargo"
    assert session.scalar(select(CommodityMapping.leaf_id)) == "general-cargo/breakbulk/project-cargo"


def test_c6_an_unknown_leaf_is_refused(session, feed):
    with pytest.raises(ValidationError) as caught:
        commodities.map_commodity(session, "gizmo", "Unobtainium")
    assert caught.value.details["parameter"] == "leaf"
    with pytest.raises(ValidationError):
        commodities.map_commodity(session, "gizmo", "Grains")  # a subgroup, not a leaf
    with pytest.raises(ValidationError):
        commodities.map_commodity(session, "  ", "Soybeans")
    assert session.scalar(select(CommodityMapping.raw_key)) is None
    assert leaves(session)["4"] is None


def test_c6_a_mapping_survives_a_commit(sessions, tmp_path):
    with sessions() as session, session.begin():
        feed = feeds.add_feed(session, "Committed Feed", ["BRSSZ"])
        ingest.ingest_file(session, feed, write_feed(tmp_path / "a.csv", {"1": "gizmo"}))
        commodities.map_commodity(session, "gizmo", "Bagged Cargo")
    with sessions() as session:
        assert commodities.mappings(session) == {"gizmo": "general-cargo/breakbulk/bagged-cargo"}
        assert commodities.unresolved(session) == []
