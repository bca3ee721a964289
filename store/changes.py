"""A cheap signal that the store has changed, for caches of what was read from it.

`change_stamp(engine)` returns a function whose value changes whenever any connection,
in any process, commits to the store. A cache that takes the stamp before it reads
may keep what it read while the stamp stays the same: its answers are then exactly as
fresh as a new query (a key revoked or a subscription cancelled a moment ago is seen
by the very next request).

SQLite gives such a stamp for a few microseconds without reading a table: `PRAGMA
data_version` on a connection of the stamp's own, which never writes (the value moves
with every commit of every other connection). Other back ends have no signal here:
their function returns None, and callers read the store every time.
"""

from __future__ import annotations

import sqlite3
import threading
from typing import Callable

from sqlalchemy import Engine

from store.settings import sqlite_path

Stamp = Callable[[], "int | None"]


def change_stamp(engine: Engine | None) -> Stamp:
    """The change stamp of the store behind `engine` (see the module docstring); a
    function that always returns None where there is none."""
    path = sqlite_path(engine.url.render_as_string(hide_password=False)) if engine is not None else None
    if path is None:
        return _no_stamp
    return _SqliteStamp(str(path))


def _no_stamp() -> None:
    return None


class _SqliteStamp:
    """`PRAGMA data_version` of a connection of its own, which only ever runs this
    pragma; thread-safe."""

    #: Seconds to wait on a busy database before answering None (read the store then).
    TIMEOUT = 0.05

    def __init__(self, path: str):
        self._path = path
        self._connection: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def __call__(self) -> int | None:
        with self._lock:
            try:
                if self._connection is None:
                    self._connection = sqlite3.connect(self._path, timeout=self.TIMEOUT, check_same_thread=False)
                return self._connection.execute("PRAGMA data_version").fetchone()[0]
            except sqlite3.Error:
                return None
