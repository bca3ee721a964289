"""The migrations make the schema the model declares (`store.database.schema`), on
SQLite and PostgreSQL: every store is created and upgraded through them, so a
difference would be a store without an index its reads and upkeep count on."""

from __future__ import annotations

import contextlib

import pytest
import sqlalchemy as sa
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
    from store.views import builds, upkeep
    from store.views.lineups import Lineups
    from store.query import LineupQuery
    from store.views.stored import copy_rows

    engine = engine_for(store_settings)
    upgrade(engine, "0008")
    load_ports(engine)
    sessions = make_sessionmaker(engine)
    with todays_code_on(engine), transaction(sessions) as session:
        payload = demo.load_demo(session, 300, 7, dt.date(2024, 3, 1))
    with todays_code_on(engine):
        builds.ensure_buyer(sessions, payload["buyer_id"])
    with todays_code_on(engine), transaction(sessions) as session:  # as 0008's code kept them: a by_source view per feed set
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

    from store.database.db import transaction
    from store.database.migrate import upgrade
    from store.intake import demo
    from store.views import builds

    engine, sessions = _sqlite_store_at(store_settings, "0008", "PostgreSQL keeps its planner statistics per column, not per index")
    with todays_code_on(engine):
        with transaction(sessions) as session:
            payload = demo.load_demo(session, 300, 7, dt.date(2024, 3, 1))
        builds.ensure_buyer(sessions, payload["buyer_id"])  # its first view's build analyses the table
    statistics = "SELECT count(*) FROM sqlite_stat1 WHERE idx = :index"
    with engine.begin() as connection:
        assert connection.scalar(text(statistics), {"index": "ix_merged_rows_vessel"}) == 1
    upgrade(engine)
    with engine.begin() as connection:
        for index in ("ix_merged_rows_vessel", "ix_merged_rows_port_commodity", "ix_records_vessel", "ix_records_name"):
            assert connection.scalar(text(statistics), {"index": index}) == 1, index
    engine.dispose()


def test_upgrading_turns_the_records_text_times_into_the_same_times_as_integers(store_settings, tmp_path):
    """Migration 0014: SQLite kept a record's times as ISO text, and keeps them now as
    integer nanoseconds (`schema.RecordTime`: 8 bytes instead of 26, five times a
    record). A store of 0013 whose records hold the text the old code wrote reads
    the same times after the upgrade, to the microsecond, before 1970 too; and the
    code now writes integers."""
    import datetime as dt

    from sqlalchemy import select, text

    from store.database.db import transaction
    from store.database.migrate import upgrade
    from store.database.schema import Record
    from store.intake import feeds, ingest

    engine, sessions = _sqlite_store_at(store_settings, "0013", "PostgreSQL keeps timestamps: 0014 leaves it as it is")
    path = tmp_path / "santos.csv"
    path.write_text(
        "ref,port_unlocode,vessel_imo,vessel_name,commodity,quantity,eta,etd\n"
        "R1,BRSSZ,9074729,Ocean Grace,Soybeans,65000,2024-01-05T10:00:00Z,\n"
        "R2,BRSSZ,9305609,Apollo,Corn,30000,1969-07-20T20:17:40Z,1969-12-31T23:59:59Z\n"
    )
    with transaction(sessions) as session:
        ingest.ingest_file(session, feeds.add_feed(session, "Santos Lineup", ["BRSSZ"]), path)
    times = ("eta", "etb", "etd", "created_at", "updated_at")
    columns = [getattr(Record, name) for name in times]
    with transaction(sessions) as session:
        written = {row[0]: row[1:] for row in session.execute(select(Record.ref, *columns))}
        assert {session.scalar(text("SELECT typeof(eta) FROM records WHERE ref = 'R1'"))} == {"integer"}
        # As the code of 0013 kept them: SQLAlchemy's SQLite text, with microseconds.
        old = dt.timedelta(microseconds=123_457)
        for ref, values in written.items():
            olden = {name: None if value is None else (value - old).strftime("%Y-%m-%d %H:%M:%S.%f")
                     for name, value in zip(times, values)}
            session.execute(text(f"UPDATE records SET {', '.join(f'{n} = :{n}' for n in times)} WHERE ref = :ref"),
                            {**olden, "ref": ref})
    upgrade(engine)
    with transaction(sessions) as session:
        read = {row[0]: row[1:] for row in session.execute(select(Record.ref, *columns))}
        kinds = set(session.scalars(text(f"SELECT {' || '.join(f'typeof({n})' for n in times)} FROM records")))
    assert read == {
        ref: tuple(None if value is None else value - old for value in values) for ref, values in written.items()
    }
    assert read["R2"][0] == dt.datetime(1969, 7, 20, 20, 17, 40) - old
    # (eta, etb, etd, created_at, updated_at) of R1, then of R2: blanks stay NULL.
    assert kinds == {"integernullnullintegerinteger", "integernullintegerintegerinteger"}
    engine.dispose()


@contextlib.contextmanager
def todays_code_on(engine):
    """Today's code writing a store of an older revision (as that revision's code
    did): the tables and columns today's model has and the store lacks are there
    while it writes, and gone again before the upgrade under test, which adds them
    itself. Without them today's code cannot write there at all (migration 0016's
    `merged_views.seq`, for one)."""
    inspector = sa.inspect(engine)
    present = set(inspector.get_table_names())
    tables = [table for table in Base.metadata.sorted_tables if table.name not in present]
    columns = [
        (table.name, column)
        for table in Base.metadata.sorted_tables if table.name in present
        for column in table.columns if column.name not in {c["name"] for c in inspector.get_columns(table.name)}
    ]
    with engine.begin() as connection:
        for table in tables:
            table.create(connection)
        for name, column in columns:
            connection.execute(sa.text(f"ALTER TABLE {name} ADD COLUMN {column.name} {column.type.compile(engine.dialect)}"))
    try:
        yield
    finally:
        with engine.begin() as connection:
            for name, column in columns:
                connection.execute(sa.text(f"ALTER TABLE {name} DROP COLUMN {column.name}"))
            for table in reversed(tables):
                table.drop(connection)


def _sqlite_store_at(store_settings, revision: str, why_not_postgresql: str):
    """(engine, sessionmaker) of the fresh store migrated to `revision`, with the port
    directory; on PostgreSQL the test is skipped, saying `why_not_postgresql`."""
    from store.database.db import engine_for, load_ports, make_sessionmaker
    from store.database.migrate import upgrade

    engine = engine_for(store_settings)
    if engine.dialect.name != "sqlite":
        engine.dispose()
        pytest.skip(why_not_postgresql)
    upgrade(engine, revision)
    load_ports(engine)
    return engine, make_sessionmaker(engine)


def test_migration_0014_converts_every_time_both_ways_exactly():
    """0014's SQL against `RecordTime`'s own conversion, over 2,000 random times of
    every year a nanosecond count can hold (1677-2262), with microseconds: the upgrade
    gives the integers the code writes, the downgrade the text the code of 0013 wrote."""
    import datetime as dt
    import random

    from alembic.operations import Operations
    from alembic.runtime.migration import MigrationContext
    from sqlalchemy import create_engine, text

    from store.database.migrate import scripts
    from store.database.schema import RecordTime

    migration = scripts().get_revision("0014").module
    rng = random.Random(14)
    times = [dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=rng.randint(-9 * 10**15, 9 * 10**15)) for _ in range(2_000)]
    texts = [t.strftime("%Y-%m-%d %H:%M:%S.%f") for t in times]
    engine = create_engine("sqlite://")
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE records (eta DATETIME, etb DATETIME, etd DATETIME, "
                                "created_at DATETIME, updated_at DATETIME)"))
        connection.execute(text("INSERT INTO records VALUES (:t, NULL, :t, :t, :t)"), [{"t": t} for t in texts])
        with Operations.context(MigrationContext.configure(connection)):
            migration.upgrade()
        stored = connection.execute(text("SELECT eta, etb, etd, created_at, updated_at FROM records")).all()
        assert [row[0] for row in stored] == [RecordTime().process_bind_param(t, engine.dialect) for t in times]
        assert all(row[1] is None and row[0] == row[2] == row[3] == row[4] for row in stored)
        assert [RecordTime().process_result_value(row[0], engine.dialect) for row in stored] == times
        with Operations.context(MigrationContext.configure(connection)):
            migration.downgrade()
        assert [row[0] for row in connection.execute(text("SELECT eta FROM records"))] == texts
    engine.dispose()
