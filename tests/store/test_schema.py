"""The migrations make the schema the model declares (`store.database.schema`), on
SQLite and PostgreSQL: every store is created and upgraded through them, so a
difference would be a store without an index its reads and upkeep count on."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from store.database.schema import Base


def test_the_migrated_schema_is_the_declared_one(engine):
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"include_schemas": False})
        differences = compare_metadata(context, Base.metadata)
    assert differences == []


def test_the_revisions_read_without_alembic_are_alembics_own(store_settings):
    """`lineups serve` and every command check the store's revision without importing
    Alembic (`store.database.migrate`): the newest from the migrations' file names, the
    store's with a plain query. Both must say what Alembic says, at every step of an
    upgrade, so that a migration whose revision id is not its file's number is caught
    here rather than by a server that refuses an upgraded store."""
    from store.database.db import engine_for
    from store.database.migrate import current_revision, head_revision, scripts, upgrade

    alembics_scripts = scripts()
    assert head_revision() == alembics_scripts.get_current_head()
    engine = engine_for(store_settings)
    try:
        assert current_revision(engine) is None  # an empty store
        for script in reversed(list(alembics_scripts.walk_revisions())):
            upgrade(engine, script.revision)
            with engine.connect() as connection:
                alembics = MigrationContext.configure(connection).get_current_revision()
            assert current_revision(engine) == alembics == script.revision
    finally:
        engine.dispose()


def test_upgrading_a_store_with_records_and_their_revisions_loses_nothing(store_settings, tmp_path):
    """Migration 0008 drops a column of `records`, which revisions refer to: a store
    of 0007 with records and revisions comes through whole (on SQLite a table copy
    would have tripped over the revisions' foreign key)."""
    from store.database.db import engine_for, load_ports, make_sessionmaker, transaction
    from store.database.migrate import current_revision, head_revision, upgrade
    from store.database.schema import Record, RecordRevision
    from store.intake import feeds, ingest
    from sqlalchemy import func, select

    engine = engine_for(store_settings)
    upgrade(engine, "0007")
    load_ports(engine)
    sessions = make_sessionmaker(engine)
    path = tmp_path / "santos.csv"
    header = "ref,port_unlocode,vessel_imo,vessel_name,commodity,quantity,eta\n"
    with transaction(sessions) as session:
        feed = feeds.add_feed(session, "Santos Lineup", ["BRSSZ"])
        path.write_text(header + "R1,BRSSZ,9074729,Ocean Grace,Soybeans,65000,2024-01-05T10:00:00Z\n")
        ingest.ingest_file(session, feed, path)
    with transaction(sessions) as session:
        path.write_text(header + "R1,BRSSZ,9074729,Ocean Grace,Soybeans,61000,2024-01-06T10:00:00Z\n")
        assert ingest.ingest_file(session, session.merge(feed), path).updated == 1
    upgrade(engine)
    assert current_revision(engine) == head_revision()
    with transaction(sessions) as session:
        assert session.scalar(select(func.count()).select_from(Record)) == 1
        assert session.scalar(select(func.count()).select_from(RecordRevision)) == 1
        assert session.scalar(select(Record.quantity)) == 61000
    engine.dispose()


def test_upgrading_drops_the_by_source_views_of_feed_sets_and_reads_by_source_again(store_settings):
    """Migration 0009: `by_source` rows were kept once per buyer feed set; now one
    view holds every feed's rows. The upgrade drops the old views with their rows,
    keeps the `all` views, and the next `by_source` read builds the one view."""
    import datetime as dt

    from sqlalchemy import func, select

    from store.database.db import engine_for, load_ports, make_sessionmaker, transaction
    from store.database.migrate import upgrade
    from store.database.schema import MergedRow, MergedView
    from store.intake import demo
    from store.views import upkeep
    from store.views.lineups import Lineups
    from store.views.query import LineupQuery
    from store.views.stored import copy_rows

    engine = engine_for(store_settings)
    upgrade(engine, "0008")
    load_ports(engine)
    sessions = make_sessionmaker(engine)
    with transaction(sessions) as session:
        payload = demo.load_demo(session, 300, 7, dt.date(2024, 3, 1))
    upkeep.ensure_buyer(sessions, payload["buyer_id"])
    with transaction(sessions) as session:  # as 0008's code kept them: a by_source view per feed set
        one = session.scalar(select(MergedView).where(MergedView.mode == "by_source"))
        feeds = sorted(session.scalar(select(MergedView.feeds).where(MergedView.mode == "all")))
        old = MergedView(mode="by_source", feed_set=upkeep.ViewKey("by_source", tuple(feeds)).feed_set, feeds=feeds,
                         versions=dict(one.versions), state="ready", max_span=one.max_span, row_count=0)
        session.add(old)
        session.flush()
        old.row_count = copy_rows(session.connection(), one.id, old.id)
        kept = session.scalar(select(MergedView.row_count).where(MergedView.mode == "all"))
    upgrade(engine)
    with transaction(sessions) as session:
        assert session.execute(select(MergedView.mode)).scalars().all() == ["all"]
        assert session.scalar(select(func.count()).select_from(MergedRow)) == kept
    page = Lineups(sessions).page(payload["buyer_id"], LineupQuery(merge="by_source"), None, 5)
    assert len(page.records) == 5
    engine.dispose()


def test_upgrading_through_the_index_rebuild_keeps_the_planners_statistics(store_settings):
    """Migration 0009 rebuilt the (view, vessel, port) index of `merged_rows`; SQLite
    drops a dropped index's statistics, and without them it probed `latest` through
    that index where it should not (p99 of distinct pages at 1,000,000 records:
    88 ms -> 5.9 s). 0010 analyses the table again; 0011 adds the (view, port,
    commodity) index and analyses it; 0013 leads the records' lookup indexes by key,
    which SQLite uses only with their statistics (a daily update at 1,000,000 records
    8.8-9.1 s without them, 3.2-4.6 s with them), and analyses the records."""
    import datetime as dt

    from sqlalchemy import text

    from store.database.db import engine_for, load_ports, make_sessionmaker, transaction
    from store.database.migrate import upgrade
    from store.intake import demo
    from store.views import upkeep

    engine = engine_for(store_settings)
    if engine.dialect.name != "sqlite":
        engine.dispose()
        pytest.skip("PostgreSQL keeps its planner statistics per column, not per index")
    upgrade(engine, "0008")
    load_ports(engine)
    sessions = make_sessionmaker(engine)
    with transaction(sessions) as session:
        payload = demo.load_demo(session, 300, 7, dt.date(2024, 3, 1))
    upkeep.ensure_buyer(sessions, payload["buyer_id"])  # its first view's build analyses the table
    statistics = "SELECT count(*) FROM sqlite_stat1 WHERE idx = :index"
    with engine.begin() as connection:
        assert connection.scalar(text(statistics), {"index": "ix_merged_rows_vessel"}) == 1
    upgrade(engine)
    with engine.begin() as connection:
        for index in ("ix_merged_rows_vessel", "ix_merged_rows_port_commodity", "ix_records_vessel", "ix_records_name"):
            assert connection.scalar(text(statistics), {"index": index}) == 1, index
    engine.dispose()
