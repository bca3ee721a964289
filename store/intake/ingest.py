"""Ingest of feed files (contract C10, C11).

A file (CSV with a header row, or JSON Lines) is read whole (`store.intake.feedfile`),
validated column by column with pandas (fast enough for 1,000,000 rows), and either
refused whole with a report of every bad row (line, field, reason) or upserted by
(feed, ref) in the caller's transaction. A row whose content has not changed keeps its
`updated_at`; a row that changed keeps its previous version in `record_revisions`.
"""

from __future__ import annotations

import dataclasses
import time
from contextlib import contextmanager
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
from store.frames import pd
from sqlalchemy import bindparam, func, insert, select, update
from sqlalchemy.orm import Session

from store.intake import validate
from store.intake.commodities import mappings as commodity_mappings
from store.intake.feeds import lock_feed, next_version
from store.intake.feedfile import read_feed_file
from store.fields import CONTENT_FIELDS, content_json, stored_now
from store.intake.mapping import Mapping
from store.database.db import analyze_if_stale, sqlite_page_cache, vacuum_after_commit
from store.database.schema import Feed, Record, RecordRevision
from store.views.records import names_carried
from store.views import changelog, upkeep

__all__ = ["IngestReport", "ingest_file", "read_feed_file", "upsert"]

#: Rows per database round trip; also the progress bar's step.
CHUNK = 20_000
#: The fewest new records for which `_indexes_built_after` rebuilds the indexes.
BULK_LOAD = 100_000

Progress = Callable[[int], None]


@dataclasses.dataclass
class IngestReport:
    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    unresolved_commodities: int = 0
    #: The kept views brought up to date, by how (`upkeep.refresh_feeds`), and the
    #: seconds that took; not part of the C11 report.
    views: dict = dataclasses.field(default_factory=dict)
    views_seconds: float = 0.0

    def as_dict(self) -> dict[str, int]:
        return {
            "inserted": self.inserted, "updated": self.updated, "unchanged": self.unchanged,
            "unresolved_commodities": self.unresolved_commodities,
        }


def ingest_file(
    session: Session,
    feed: Feed,
    path: str | Path,
    mapping: Mapping | None = None,
    progress: Progress | None = None,
) -> IngestReport:
    """Validate the file and upsert its rows into `feed`.

    Raises ValidationError, whose details list every bad row, and writes nothing when
    any row is bad. Does not commit."""
    frame = read_feed_file(path, mapping)
    clean = validate.validate_frame(frame, name=Path(path).name, **(mapping.parsing() if mapping else {}))
    return upsert(session, feed, clean, progress)


def upsert(
    session: Session, feed: Feed, clean: pd.DataFrame, progress: Progress | None = None
) -> IngestReport:
    """Upsert validated rows (the output of `validate.validate_frame`) by (feed, ref)."""
    with sqlite_page_cache(session, SMALL_CACHE_MIB if len(clean) <= BY_REF else LARGE_CACHE_MIB):
        return _upsert(session, feed, clean, progress)


def _upsert(session: Session, feed: Feed, clean: pd.DataFrame, progress: Progress | None) -> IngestReport:
    now = stored_now()
    # What the file is compared with is read under the feed's lock: two ingests of
    # one feed run one after the other, the second comparing with the first's records.
    lock_feed(session, feed.id)
    clean = validate.derive(clean, commodity_mappings(session))
    existing = _existing(session, feed, clean["ref"])
    joined = clean.merge(existing, on="ref", how="left")
    is_new = joined["id"].isna().to_numpy()
    changed = ~is_new & (joined["old_hash"] != joined["content_hash"]).to_numpy()
    report = IngestReport(
        inserted=int(is_new.sum()),
        updated=int(changed.sum()),
        unchanged=int((~is_new & ~changed).sum()),
        unresolved_commodities=int((joined["commodity"].notna() & joined["commodity_leaf"].isna()).sum()),
    )
    joined["updated_at"] = joined["updated_at"].fillna(pd.Timestamp(now, tz="UTC"))
    if report.inserted or report.updated:
        # The kept views of the feed merge again the (vessel, port) pairs this touches,
        # before and after the change, in this transaction (issue 15).
        now_pairs = joined.loc[is_new | changed, ["vessel_key", "port_unlocode"]].astype(object)
        old_pairs = joined.loc[changed, ["old_vessel_key", "old_port"]].astype(object)
        touched = set(map(tuple, now_pairs.to_numpy())) | set(map(tuple, old_pairs.to_numpy()))
        # Issue 19 rule 1: the views resolve a name's name-only records by the IMO
        # numbers the name carries, so a change that makes or breaks such a link notes
        # it (before and after; read before the records are written).
        if len(touched) <= changelog.LISTED_PAIRS:  # past it, the views merge afresh anyway
            touched |= _links(session, feed, joined, is_new, changed)
        version = next_version(session, feed.id)
        with _indexes_built_after(session, report.inserted):
            _insert_new(session, feed, joined[is_new], now, progress)
        _update_changed(session, joined[changed], now, progress)
        # After the commit (PostgreSQL): the pages all-visible, for index-only lookups.
        vacuum_after_commit(session, "records", report.inserted + report.updated)
        # Before the views' lookups plan their statements; the lock it takes on the
        # table (one ANALYZE at a time) comes before any view's: no deadlock.
        analyze_if_stale(session, "records", report.inserted + report.updated)
        changelog.note_changes(session, feed.id, version, touched)
        started = time.perf_counter()
        report.views = upkeep.refresh_feeds(session, [feed.id])
        report.views_seconds = time.perf_counter() - started
    return report


def _existing(session: Session, feed: Feed, refs: pd.Series) -> pd.DataFrame:
    """The feed's stored records of `refs` (what ingest compares the file with): by
    the (feed, ref) key an IN list at a time for a file of up to `BY_REF` rows (a
    daily update reads its own records, not its feed's: 0.65 s for a feed of 50,000
    records), the whole feed in one pass for a larger one."""
    statement = select(
        Record.id, Record.ref, Record.content_hash, Record.version, Record.vessel_key, Record.port_unlocode,
        Record.name_key, Record.commodity.is_not(None),
    ).where(Record.feed_id == feed.id)
    refs = refs.astype(object).tolist()
    if len(refs) > BY_REF:
        rows = session.execute(statement).all()
    else:
        rows = [row for start in range(0, len(refs), _REFS) for row in session.execute(
            statement.where(Record.ref.in_(refs[start : start + _REFS])))]
    return pd.DataFrame(
        rows, columns=["id", "ref", "old_hash", "version", "old_vessel_key", "old_port", "old_name_key", "old_served"]
    )


#: The most rows of a file whose stored records `_existing` reads by ref, and refs per
#: IN list (SQLite allows 32,766 parameters).
BY_REF, _REFS = 20_000, 5_000
#: SQLite's page cache (MiB) for a file of up to `BY_REF` rows, and for a larger one.
#: A large load writes every index all over and wants the large cache; a daily update
#: writes a few thousand rows, and a large cache only costs it the first touch of the
#: memory it fills with pages until the commit (~90,000 page faults in a new process:
#: a daily update of 1,000 records at 1,000,000, 3.7 → 3.3 s, 2026-11-27). A view
#: merged afresh during a small update takes the large cache for itself
#: (`store.views.upkeep`).
SMALL_CACHE_MIB, LARGE_CACHE_MIB = 16, 256


def _links(session: Session, feed: Feed, joined: pd.DataFrame, is_new: np.ndarray, changed: np.ndarray) -> set[tuple[str, None]]:
    """`changelog.link(imo key, name key)` of the (IMO, name) links this change may make or
    break in the feed: those of a revised record whose IMO number, name or being served
    (commodity not blank: only served records teach an IMO, C1) changed (before and
    after), and those of a new served record that no served record of the feed carried
    before (read by the feed's (vessel) index, before the change is written). A
    revision that keeps all three, or a new record of a vessel the feed already named
    so, moves no name between vessel keys, so that a daily update does not widen its
    views' upkeep to every port of every vessel it mentions."""

    def pairs(keys: pd.Series, names: pd.Series, served) -> set[tuple[str, str]]:
        frame = pd.DataFrame({"key": keys.astype(object).to_numpy(), "name": names.astype(object).to_numpy()})
        is_imo = frame["key"].astype("string").str.startswith("IMO").fillna(False).to_numpy(dtype=bool)
        frame = frame[is_imo & frame["name"].notna().to_numpy() & np.asarray(served, dtype=bool)]
        return set(map(tuple, frame.drop_duplicates().to_numpy()))

    served = joined["commodity"].notna().to_numpy()
    was_served = joined["old_served"].astype(object).eq(True).to_numpy()
    moved = changed & (
        (joined["vessel_key"].astype(object) != joined["old_vessel_key"].astype(object)).to_numpy()
        | (joined["name_key"].astype(object) != joined["old_name_key"].astype(object)).to_numpy()
        | (served != was_served)
    )
    made = pairs(joined.loc[is_new, "vessel_key"], joined.loc[is_new, "name_key"], served[is_new])
    if made:
        had = names_carried(session, [feed.id], {key for key, _ in made})
        made -= {(key, name) for key, name, _ in had}
    made |= pairs(joined.loc[moved, "vessel_key"], joined.loc[moved, "name_key"], served[moved])
    broken = pairs(joined.loc[moved, "old_vessel_key"], joined.loc[moved, "old_name_key"], was_served[moved])
    return {changelog.link(key, name) for key, name in made | broken}


_STORED = (*CONTENT_FIELDS, "vessel_key", "name_key", "commodity_raw_key", "commodity_leaf", "content_hash")


def _python_values(column: pd.Series, sqlite: bool) -> list:
    """A column as Python values for a DB-API driver: None for missing, naive UTC
    datetimes (for SQLite, integer nanoseconds, as `schema.RecordTime` keeps them),
    Python numbers."""
    if isinstance(column.dtype, pd.DatetimeTZDtype):
        return _python_times(column, sqlite)
    if isinstance(column.dtype, pd.CategoricalDtype):  # text from validate_frame and derive
        values = column.cat.categories.to_numpy(dtype=object)
        return np.append(values, None)[column.cat.codes.to_numpy()].tolist()
    missing = column.isna().to_numpy()
    if column.dtype == object:
        if not missing.any():
            return column.tolist()
        values = column.to_numpy(dtype=object, copy=True)
    else:
        values = np.array(column.tolist(), dtype=object)
    values[missing] = None
    return values.tolist()


def _python_times(column: pd.Series, sqlite: bool) -> list:
    """Each distinct time converted once: a feed repeats its times over many rows."""
    codes, uniques = pd.factorize(column, use_na_sentinel=True)
    naive = uniques.tz_convert(None).as_unit("us")
    if not len(naive):
        return [None] * len(codes)
    if sqlite:  # whole microseconds, as a datetime holds (`RecordTime`)
        values = (naive.asi8 * 1000).astype(object)
    else:
        values = np.array(naive.to_numpy().tolist(), dtype=object)
    return np.append(values, None)[codes].tolist()


def _rows(frame: pd.DataFrame, columns: list[str], sqlite: bool) -> Iterator[tuple]:
    return zip(*(_python_values(frame[c], sqlite) for c in columns))


def _insert_new(session, feed, frame, now, progress) -> None:
    """Insert new records with one executemany per chunk. A driver-level statement
    (not the ORM) is what gets ingest past 50,000 rows/s on SQLite."""
    if frame.empty:
        return
    connection = session.connection()
    sqlite = connection.dialect.name == "sqlite"
    columns = ["ref", *_STORED, "updated_at"]
    frame = frame.assign(feed_id=feed.id, version=1, created_at=pd.Timestamp(now, tz="UTC"))
    columns += ["feed_id", "version", "created_at"]
    mark = "?" if sqlite else "%s"
    statement = (
        f"INSERT INTO {Record.__tablename__} ({', '.join(columns)}) "
        f"VALUES ({', '.join([mark] * len(columns))})"
    )
    # The driver's own cursor, in the session's transaction: it takes the rows as an
    # iterator, with no list of tuples built first and no per-row checks. The next
    # chunk's Python values are made on a helper thread while the driver writes this
    # one (sqlite3 and psycopg release the GIL while the database works).
    def values(start: int) -> list[list]:
        chunk = frame.iloc[start : start + CHUNK]
        return [_python_values(chunk[c], sqlite) for c in columns]

    starts = range(0, len(frame), CHUNK)
    cursor = connection.connection.cursor()
    try:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ingest") as helper:
            pending = helper.submit(values, starts[0])
            for following in [*starts[1:], None]:
                chunk = pending.result()
                if following is not None:
                    pending = helper.submit(values, following)
                if sqlite:
                    cursor.executemany(statement, zip(*chunk))
                else:  # PostgreSQL's bulk path: COPY (psycopg escapes each value)
                    with cursor.copy(f"COPY {Record.__tablename__} ({', '.join(columns)}) FROM STDIN") as copy:
                        for row in zip(*chunk):
                            copy.write_row(row)
                if progress:
                    progress(len(chunk[0]))
    finally:
        cursor.close()


@contextmanager
def _indexes_built_after(session: Session, new_records: int) -> Iterator[None]:
    """A load larger than the records table (a store's first feeds) drops the table's
    secondary indexes and builds them again after its inserts, in its transaction:
    building a b-tree from a sorted pass is several times faster than inserting a
    million keys, one at a time, into each of three (1,000,000 records: ~46,000 ->
    ~53,000 rows/s on SQLite, docs/benchmarks.md). The (feed, ref) key stays (it is a
    constraint). The table's highest id bounds the rows it holds. On PostgreSQL the
    DROP locks the table until the commit: provenance and coverage wait for the load
    (docs/operators.md); readers of kept views do not."""
    connection = session.connection()
    held = connection.execute(select(func.max(Record.id))).scalar_one() or 0
    if new_records < max(BULK_LOAD, held):
        yield
        return
    indexes = sorted(Record.__table__.indexes, key=lambda index: index.name)
    for index in indexes:
        index.drop(connection)
    yield
    for index in indexes:
        index.create(connection)


def _records(frame: pd.DataFrame) -> list[dict]:
    """Rows as dicts for SQLAlchemy's executemany (updates)."""
    columns = ["ref", *_STORED, "updated_at"]
    return [dict(zip(columns, row)) for row in _rows(frame, columns, sqlite=False)]


def _update_changed(session, frame, now, progress) -> None:
    if frame.empty:
        return
    connection = session.connection()
    for start in range(0, len(frame), CHUNK):
        part = frame.iloc[start : start + CHUNK]
        ids = [int(i) for i in part["id"]]
        old = {row.id: row for row in session.execute(select(Record).where(Record.id.in_(ids))).scalars()}
        connection.execute(
            insert(RecordRevision),
            [
                {
                    "record_id": rid,
                    "version": old[rid].version,
                    "content": content_json(old[rid]),
                    "updated_at": old[rid].updated_at,
                    "replaced_at": now,
                }
                for rid in ids
            ],
        )
        rows = _records(part)
        for rid, row in zip(ids, rows):
            row.pop("ref")
            row.update(b_id=rid, version=old[rid].version + 1)
        statement = (
            update(Record.__table__)
            .where(Record.__table__.c.id == bindparam("b_id"))
            .values({name: bindparam(name) for name in (*_STORED, "updated_at", "version")})
        )
        connection.execute(statement, rows)
        session.expire_all()
        if progress:
            progress(len(rows))
