"""`sync`: keep a local SQLite table equal to a /v1/lineups query by applying its change
feed (`GET /v1/lineups/changes`, issue 46).

The table holds the C1 columns (`id` its primary key); a second table,
`lineups_sync`, holds per table the query it follows and the cursor of the last page
applied. A sync is one SQLite transaction: every page is applied (upsert by id, delete
by id) and the new cursor written in it, and it commits once the feed is caught up, so
a sync killed at any point leaves the previous state or the new one, never part of
a page. A cursor the service refuses as `cursor_expired` (its feeds changed, or the
last sync is older than the feed's retention) starts the table over in the same
transaction; a table that followed other filters starts over too.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from dataclasses import dataclass
from typing import Any

from tqdm import tqdm

from client.errors import ApiError
from client.frames import frame_of
from client.params import query_params
from store.fields import RECORD_FIELDS

#: The table of each synced table's query and cursor.
STATE_TABLE = "lineups_sync"
#: Items asked for per page of the change feed, unless `limit` is given.
PAGE = 500
#: Restarts (`cursor_expired`) one sync makes before it gives up.
RESTARTS = 3
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


@dataclass(frozen=True)
class SyncReport:
    """What one sync did: items applied, pages read, rows held after it, and whether it
    started the table over."""

    upserted: int
    deleted: int
    pages: int
    rows: int
    restarted: bool


def sync(client, path: str, table: str = "lineups", parquet: str | None = None, **filters: Any) -> SyncReport:
    """Bring `table` in the SQLite file `path` to `client`'s current result of the
    query `filters` (as `Client.lineups` takes them) through the change feed, in one
    transaction; with `parquet`, then write the table to that Parquet file (replaced
    whole, atomically). Raises ApiError for an error answer (the table is left as it
    was) and ValueError for a table name that is not a plain identifier."""
    if not _NAME.fullmatch(table):
        raise ValueError(f"table must be a plain SQL identifier, not {table!r}")
    # The page size is no part of the query the table follows (C4: it may vary).
    filters = {"limit": PAGE, **filters}
    query = json.dumps({k: v for k, v in query_params(filters).items() if k != "limit"}, sort_keys=True)
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")
        try:
            report = _apply(connection, client, table, query, filters)
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")
        if parquet is not None:
            _write_parquet(connection, table, parquet)
        return report
    finally:
        connection.close()


def _apply(connection: sqlite3.Connection, client, table: str, query: str, filters: dict) -> SyncReport:
    columns = ", ".join(f'"{name}"' for name in RECORD_FIELDS)
    connection.execute(f'CREATE TABLE IF NOT EXISTS "{table}" ({columns}, PRIMARY KEY ("id"))')
    connection.execute(f'CREATE TABLE IF NOT EXISTS {STATE_TABLE} (table_name TEXT PRIMARY KEY, query TEXT, cursor TEXT)')
    found = connection.execute(f"SELECT query, cursor FROM {STATE_TABLE} WHERE table_name = ?", (table,)).fetchone()
    cursor = found[1] if found and found[0] == query else None
    restarted, restarts = found is not None and cursor is None, 0
    if cursor is None:
        connection.execute(f'DELETE FROM "{table}"')
    upsert = f'INSERT OR REPLACE INTO "{table}" ({columns}) VALUES ({", ".join("?" * len(RECORD_FIELDS))})'
    upserted = deleted = pages = 0
    with tqdm(desc=f"sync {table}", unit=" changes", disable=not client.progress) as bar:
        while True:
            try:
                page = client.changes(cursor, **filters)
            except ApiError as error:
                if not error.cursor_expired or restarts >= RESTARTS:
                    raise
                restarts, restarted = restarts + 1, True
                connection.execute(f'DELETE FROM "{table}"')
                cursor = None
                continue
            pages += 1
            rows = [[item["row"][name] for name in RECORD_FIELDS] for item in page["data"] if item["op"] == "upsert"]
            gone = [(item["id"],) for item in page["data"] if item["op"] == "delete"]
            # A page's delete of an id comes before its upsert of that id, if any (ids
            # gone first, then pairs, whose deletes and upserts are of other ids).
            connection.executemany(f'DELETE FROM "{table}" WHERE "id" = ?', gone)
            connection.executemany(upsert, rows)
            upserted, deleted = upserted + len(rows), deleted + len(gone)
            bar.update(len(page["data"]))
            cursor = page["next_cursor"]
            if page["caught_up"]:
                break
    connection.execute(f"INSERT OR REPLACE INTO {STATE_TABLE} VALUES (?, ?, ?)", (table, query, cursor))
    held = connection.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
    return SyncReport(upserted, deleted, pages, held, restarted)


def _write_parquet(connection: sqlite3.Connection, table: str, path: str) -> None:
    """The table as a typed frame (`frame_of`) in a Parquet file, written beside and
    moved into place, so that a reader never sees half a file."""
    names = list(RECORD_FIELDS)
    rows = [dict(zip(names, row)) for row in connection.execute(f'SELECT * FROM "{table}" ORDER BY "id"')]
    partial = f"{path}.partial"
    frame_of(rows).to_parquet(partial, index=False)
    os.replace(partial, path)
