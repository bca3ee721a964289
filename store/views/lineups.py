"""What the API, the share links and the explorer ask for (C2, C3, C4, C7, C8): a buyer's
lineups, read from the kept views (`store.views.upkeep`) a page at a time.

`Lineups` holds only its session factories: nothing that grows with the store or the
number of buyers lives in a server process. Each call: the buyer's visible feeds (C2.1:
entitled now, narrowed by `source`; 404 and 403 as C5 says) → the views that hold their
merged rows, current (a view that is missing or behind is built or brought up to date
first, once across processes, `builds.ensure`) → one SQL statement (`store.views.sql`).

A view that another process is building: a server's `Lineups` (made with `wait=0`)
does not wait for it in its thread, where it would hold one of the few threads that
serve every buyer, but raises `builds.ViewBusy` at once; the server's coroutine then
asks again after a pause on its event loop (`patiently`), so that readers of a view
being built take no thread while they wait, and other buyers' pages go on.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterator, Sequence, TypeVar

from store.frames import pd
from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session, sessionmaker

from store.access import accounts
from store.access.accounts import FeedVersion
from store.database.db import Reads, ReplicaBehind, is_replica
from store.errors import Forbidden, NotFound
from store.merging.explain import explain as explain_row
from store.ids import is_uuid
from store.views.history import record_history
from store.query import DEFAULT_LIMIT, LineupQuery, Position
from store.views.records import load_identities, load_records_where, name_keys_of
from store.database.schema import Feed, MergedRow, MergedView, Record
from store.reference.taxonomy import Taxonomy, default_taxonomy
from store.views import builds, change_feed, sql, upkeep
from store.views.change_feed import ChangesPage, FeedPosition
from store.views.csvtext import csv_of_columns
from store.views.pages import Page, read_page
from store.views.stored import arrow_columns, frame_of

log = logging.getLogger("lineups.views")
T = TypeVar("T")
#: The fields of each record version that `Lineups.history` gives.
HISTORY_FIELDS = ("version", "updated_at", "replaced_at", "eta", "etb", "etd", "vessel_status", "quantity", "quantity_unit")
#: Rows per block of a whole-result read (exports, share links).
BLOCK_ROWS = 20_000
#: What a row id may be (C2.7: opaque and URL-safe; `store.merging.merge_ids` makes 24
#: base32 characters); anything else is no row's, known without a query.
ROW_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: Times a read tries again after bringing its views up to date (another change may
#: land in between; each try is a fresh snapshot).
_TRIES = 4
#: `patiently`'s pauses between asks, in seconds (the last one repeats): soon for a
#: short build, then twice a second, a few milliseconds of a thread each time.
PAUSES_S = (0.05, 0.1, 0.2, 0.5)


async def patiently(ask: Callable[[], Awaitable[T]], wait: float = builds.WAIT_S) -> T:
    """`await ask()`, asked again after a pause on the event loop each time it raises
    `builds.ViewBusy` (another process holds a view the read needs: a build), for up
    to `wait` seconds from the first; then the last ViewBusy is raised. `ask` runs a
    `Lineups` read of a server (`wait=0`) in an executor: a reader that waits holds no
    thread. The first ask costs nothing more than `await ask()` (a few microseconds
    against a thread's round trip of ~100 us, measured 2026-11-29)."""
    try:
        return await ask()  # nearly always: no view being built
    except builds.ViewBusy as busy:
        last, deadline = busy, time.monotonic() + wait
    for pause in itertools.chain(PAUSES_S, itertools.repeat(PAUSES_S[-1])):
        if time.monotonic() + pause > deadline:
            raise last
        await asyncio.sleep(pause)
        try:
            return await ask()
        except builds.ViewBusy as busy:
            last = busy
    raise AssertionError("an endless loop ended")


@dataclass(frozen=True)
class Summary:
    """Totals of a result (`Lineups.summary`): `tonnes` (day since the epoch, group or
    None, tonnes) of the rows in `MT`; `units` {unit or None: rows} of the rows with a
    quantity in another unit (or none); `statuses` (port_unlocode, port_name, status
    or None, vessels)."""

    tonnes: pd.DataFrame
    units: dict[str | None, int]
    statuses: pd.DataFrame

    @classmethod
    def empty(cls) -> "Summary":
        return cls(
            pd.DataFrame(columns=["day", "group", "tonnes"]), {},
            pd.DataFrame(columns=["port_unlocode", "port_name", "status", "vessels"]),
        )


class ViewNotCurrent(Exception):
    """The view a read needs is missing or behind its feeds' records."""

    def __init__(self, key: upkeep.ViewKey):
        super().__init__(f"the {key.describe()} is not current")
        self.key = key


def visible_feeds(
    session: Session, buyer_id: str, source: str | None, entitled: Sequence[FeedVersion] | None = None
) -> list[FeedVersion]:
    """The feeds (id, name, data version) whose records the buyer may see for
    `source` (None: all), ordered by name. `entitled` are the buyer's entitled feeds
    when the caller has just read them with the key (on the primary); on a replica
    their versions are read again there. Raises NotFound for a UUID of no feed and
    Forbidden for a feed without an active or trial subscription (C5)."""
    if entitled is None:
        entitled = accounts.entitled_feeds(session, buyer_id)
    else:
        entitled = accounts.feed_versions_in(session, entitled)
    if source is None:
        return list(entitled)
    chosen = [feed for feed in entitled if feed.id == source]
    if chosen:
        return chosen
    if not is_uuid(source) or session.scalar(select(Feed.id).where(Feed.id == source)) is None:
        raise NotFound(f"No feed with id {source}")
    raise Forbidden("You have no active or trial subscription to this feed")


class Lineups:
    """A buyer's lineups from the kept views; thread-safe, stateless.

    `sessions` is the primary (views are built there); `reads` where pure reads go
    (a read replica when there is one, else the primary). `wait`: how long a read
    waits in its thread for a view that another process is building before it raises
    `builds.ViewBusy` (a server's: 0, and its coroutines wait, `patiently`). `noted`,
    when given, is told the id of every view a read reads (a server's
    `store.access.usage.UsageWriter.view_read`: views buyers read are kept for the
    retention once no buyer can read them, the others dropped at once, issue 47)."""

    def __init__(
        self, sessions: sessionmaker[Session], reads: Reads | None = None, taxonomy: Taxonomy | None = None,
        wait: float = builds.WAIT_S, noted: Callable[[int], None] | None = None,
    ):
        self.sessions = sessions
        self.reads = reads or Reads(sessions)
        self.taxonomy = taxonomy or default_taxonomy()
        self.wait = wait
        self.noted = noted

    # ------------------------------------------------------------ reads
    def page(
        self,
        buyer_id: str,
        query: LineupQuery,
        after: Position | None = None,
        limit: int = DEFAULT_LIMIT,
        entitled: Sequence[FeedVersion] | None = None,
        wait: float | None = None,
    ) -> Page:
        """The `limit` rows of `query`'s result after position `after` (C3, C4);
        `wait` for a view being built: this object's `wait` unless given."""

        def work(session: Session, target: sql.Target) -> Page:
            return read_page(session, query, self.taxonomy, target, after, limit)

        return self._in_views(buyer_id, query, entitled, work, None, wait) or Page([], None)

    def changes(
        self, buyer_id: str, query: LineupQuery, position: FeedPosition | None, limit: int = DEFAULT_LIMIT,
        entitled: Sequence[FeedVersion] | None = None, wait: float | None = None,
    ) -> ChangesPage:
        """The change feed's page of `query` after `position` (None: the first), at
        most `limit` items (`store.views.change_feed`); in the view the buyer reads
        now, found as every read finds it. Raises ValidationError for a position the
        feed can no longer serve exactly (`change_feed.expired`)."""

        def work(session: Session, target: sql.Target) -> ChangesPage:
            return change_feed.read(session, target, query, self.taxonomy, position, limit)

        found = self._in_views(buyer_id, query, entitled, work, None, wait)
        return found if found is not None else change_feed.without_feeds(position)

    def count(self, buyer_id: str, query: LineupQuery, entitled: Sequence[FeedVersion] | None = None) -> int:
        """How many rows `query`'s whole result has."""
        return self._in_views(
            buyer_id, query, entitled,
            lambda session, target: int(session.connection().scalar(sql.count_statement(query, self.taxonomy, target))),
            0,
        )

    def frame(self, buyer_id: str, query: LineupQuery, entitled: Sequence[FeedVersion] | None = None) -> pd.DataFrame:
        """`query`'s whole result in C3 order, in one frame (the command line's duplicate report, tests)."""
        return pd.concat([page.rows for page in self.pages(buyer_id, query, entitled)], ignore_index=True)

    def csv_blocks(
        self, buyer_id: str, query: LineupQuery, entitled: Sequence[FeedVersion] | None = None, size: int = BLOCK_ROWS,
        wait: float | None = None,
    ) -> Iterator[bytes]:
        """`pages` as CSV text without a header (C9), made from the rows as read,
        with no frame between (`csvtext.csv_of_columns`): a share link's export, the
        explorer's download."""
        for page in self.pages(buyer_id, query, entitled, size, wait):
            yield csv_of_columns(arrow_columns(page.records))

    def pages(
        self, buyer_id: str, query: LineupQuery, entitled: Sequence[FeedVersion] | None = None, size: int = BLOCK_ROWS,
        wait: float | None = None,
    ) -> Iterator[Page]:
        """`query`'s whole result in C3 order, `size` rows a page, each page read
        afresh after the previous one's last row (keyset: no row twice, none skipped
        that was there throughout). Yields at least one (maybe empty) page. `wait`
        as `page`'s: a share link's export, on threads of its own, gives the full
        `builds.WAIT_S` (a coroutine cannot ask its pages again)."""
        after: Position | None = None
        while True:
            page = self.page(buyer_id, query, after, size, entitled, wait)
            yield page
            if page.next is None:
                return
            after = page.next

    def explain(
        self, buyer_id: str, row_id: str, query: LineupQuery, entitled: Sequence[FeedVersion] | None = None
    ) -> dict[str, Any]:
        """Provenance of one merged row the buyer can see in `query`'s merge mode and
        source: the records it came from and which gave each value. Reads only the
        records of the row's merge key (groups never cross one, C2.2). Raises
        NotFound when no visible row has that id, at once when `row_id` cannot be one
        (not `ROW_ID`: PostgreSQL refused a NUL in it with a 500, issue 49 item 9)."""
        _check_row_id(row_id)
        return self._in_views(
            buyer_id, query, entitled, lambda session, target: _explained(session, target, row_id, query), None
        ) or _not_found(row_id)

    def history(
        self, buyer_id: str, row_id: str, query: LineupQuery, entitled: Sequence[FeedVersion] | None = None
    ) -> dict[str, Any]:
        """The revisions behind one merged row the buyer can see (issue 46): for each
        record it merges (in provenance's order), every stored version oldest first,
        with `updated_at`, `replaced_at` (None for the current one) and the fields
        of a call that move (`HISTORY_FIELDS`). Same rules as `explain`."""
        _check_row_id(row_id)

        def work(session: Session, target: sql.Target) -> dict[str, Any]:
            explained = _explained(session, target, row_id, query)
            return {
                "id": row_id,
                "merge": query.merge,
                "records": [
                    {
                        **{name: record[name] for name in ("source_id", "source_name", "ref")},
                        "versions": [
                            {name: version.get(name) for name in HISTORY_FIELDS}
                            for version in record_history(session, record["source_id"], record["ref"])
                        ],
                    }
                    for record in explained["records"]
                ],
            }

        return self._in_views(buyer_id, query, entitled, work, None) or _not_found(row_id)


    # ------------------------------------------------------------ the explorer's reads
    def rows_at(
        self, buyer_id: str, query: LineupQuery, offset: int, limit: int, order: tuple[str, bool] | None = None
    ) -> pd.DataFrame:
        """Rows `offset` … `offset + limit - 1` of the whole result: in C3 order, or with
        `order` = (column of `sql.ORDERABLE`, ascending) by that column, blanks last
        both ways, ties in C3 order (the explorer's table pages)."""
        column, ascending = order if order is not None else (None, True)

        def work(session: Session, target: sql.Target) -> pd.DataFrame:
            statement = sql.ordered_page_statement(
                query, self.taxonomy, target, offset, limit, column, ascending, _on_postgresql(session)
            )
            return frame_of(session.connection().execute(statement).all())

        return self._in_views(buyer_id, query, None, work, frame_of([]))

    def near(
        self, buyer_id: str, query: LineupQuery, ports: Sequence[str], spans: Sequence[tuple[int, int]]
    ) -> pd.DataFrame:
        """The result's rows at `ports` whose combined date (ns) lies in one of `spans`
        (first, last), in C3 order: what a near-duplicate check of a page reads."""

        def work(session: Session, target: sql.Target) -> pd.DataFrame:
            statement = sql.near_statement(query, self.taxonomy, target, ports, spans)
            return frame_of(session.connection().execute(statement).all())

        return self._in_views(buyer_id, query, None, work, frame_of([]))

    def summary(self, buyer_id: str, query: LineupQuery) -> Summary:
        """Totals of the whole result, computed in SQL in one read: tonnes per day and
        commodity group, rows per other quantity unit, distinct vessels per port and
        status (the explorer's charts). Its size follows the days, groups and ports of
        the result, never its rows."""

        def work(session: Session, target: sql.Target) -> Summary:
            tonnes, units, statuses = [], {}, []
            statement = sql.summary_statement(query, self.taxonomy, target)
            for part, day, a, b, c, value in session.connection().execute(statement):
                if part == "tonnes":
                    tonnes.append((int(day), a, float(value)))
                elif part == "units":
                    units[a] = int(value)
                else:
                    statuses.append((a, b, c, int(value)))
            return Summary(
                pd.DataFrame(tonnes, columns=["day", "group", "tonnes"]),
                units,
                pd.DataFrame(statuses, columns=["port_unlocode", "port_name", "status", "vessels"]),
            )

        return self._in_views(buyer_id, query, None, work, Summary.empty())

    # ------------------------------------------------------------ views
    def _in_views(
        self,
        buyer_id: str,
        query: LineupQuery,
        entitled: Sequence[FeedVersion] | None,
        work: Callable[[Session, sql.Target], T],
        empty: T,
        wait: float | None = None,
    ) -> T:
        """`work(session, target)` over the current views of the buyer's visible feeds,
        in one read (`Reads.run`); views that are missing or behind are brought up to
        date first (on the primary), and the read tried again. Raises builds.ViewBusy
        when another process holds such a view for longer than `wait` (None: `self.wait`)."""
        for _ in range(_TRIES):
            try:
                return self.reads.run(self._read, buyer_id, query, entitled, work, empty)
            except ViewNotCurrent as missing:
                builds.ensure(self.sessions, missing.key, self.wait if wait is None else wait)
        return self.reads.run(self._read, buyer_id, query, entitled, work, empty, True)

    def _read(self, session, buyer_id, query, entitled, work, empty, stale_ok: bool = False):
        feeds = visible_feeds(session, buyer_id, query.source, entitled)
        if not feeds:
            return empty
        target = current_target(session, query.merge, feeds, stale_ok)
        if self.noted is not None:
            self.noted(target.view_id)
        return work(session, target)


#: The view of a mode and feed set: one statement for every read (built and keyed once).
_VIEW = select(MergedView.id, MergedView.state, MergedView.versions, MergedView.max_span, MergedView.feeds).where(
    MergedView.mode == bindparam("mode"), MergedView.feed_set == bindparam("feed_set")
)


def current_target(session: Session, mode: str, feeds: Sequence[FeedVersion], stale_ok: bool = False) -> sql.Target:
    """The view holding `mode`'s rows of `feeds` at the feeds' versions: the `all`
    view of exactly those feeds, or the `by_source` view (every feed's rows), kept to
    those feeds. Raises ViewNotCurrent when it is missing or behind for one of them
    (on a replica: ReplicaBehind, so that the read goes to the primary, where views
    are built); `stale_ok` takes a ready view as it is."""
    versions = {feed.id: feed.data_version for feed in feeds}
    key = upkeep.ViewKey.of(mode, versions)
    hit = session.connection().execute(_VIEW, {"mode": mode, "feed_set": key.feed_set}).first()
    current = hit is not None and all(hit.versions.get(feed_id) == version for feed_id, version in versions.items())
    if hit is None or hit.state != "ready" or (not current and not stale_ok):
        if is_replica(session):
            raise ReplicaBehind(f"the {key.describe()} is not current on the replica")
        raise ViewNotCurrent(key)
    if mode == "all":
        return sql.Target(hit.id, int(hit.max_span or 0))
    sources = None if set(versions) >= set(hit.feeds) else tuple(sorted(versions))
    return sql.Target(hit.id, int(hit.max_span or 0), sources, feed_tops=True)


def _on_postgresql(session: Session) -> bool:
    return session.get_bind().dialect.name == "postgresql"


def _not_found(row_id: str):
    raise NotFound(f"No lineup row with id {row_id}")


def _explained(session: Session, target: sql.Target, row_id: str, query: LineupQuery) -> dict[str, Any]:
    """Provenance of the row `row_id` of the view `target` (`Lineups.explain`); raises
    NotFound when the reader's rows have no such id."""
    hit = session.connection().execute(
        select(
            MergedRow.vessel_key, MergedRow.port_unlocode, MergedRow.commodity_key, MergedRow.source_id,
            MergedView.feeds,
        )
        .join(MergedView, MergedView.id == MergedRow.view_id)
        .where(*sql.within(MergedRow, target), MergedRow.id == row_id)
    ).first()
    if hit is None:
        raise NotFound(f"No lineup row with id {row_id}")
    vessel, port, commodity, source, feeds = hit
    if query.merge == "by_source":  # a by_source row is its feed's own merge (C2.6)
        feeds = [source]
    where = Record.port_unlocode == port
    identities = None
    vessels = {vessel}
    if query.merge == "all":  # issue 19: the row may hold name-only records resolved to its IMO
        names = name_keys_of(session, feeds, [vessel]) if vessel.startswith("IMO") else set()
        identities = load_identities(session, feeds, names | {vessel})
        vessels |= identities.names_of().get(vessel, set())
    records = load_records_where(
        session, feeds, [Record.vessel_key.in_(sorted(vessels)) & where if vessel else where]
    )
    same = (records["port_unlocode"].astype(object) == port).to_numpy().copy()
    if query.merge == "by_source":
        # Groups never cross a merge key under by_source (C2.2); under all, rule 2
        # joins commodities within one vessel and port, so all of those are read.
        same &= (records["commodity_key"].astype(object) == commodity).to_numpy()
    result = explain_row(row_id, records[same], query.merge, identities)
    if result is None:
        raise NotFound(f"No lineup row with id {row_id}")
    return result


def _check_row_id(row_id: str) -> None:
    """Raises NotFound at once for an id that cannot be a row's (not `ROW_ID`)."""
    if not ROW_ID.fullmatch(row_id):
        raise NotFound("No lineup row with that id: a row id is letters and digits (the `id` of /v1/lineups)")
