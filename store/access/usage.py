"""Notes of use, written off the request path (issue 16 item 1; C5 keys, C8 links).

Requests note that an API key or a share link was used (`last_used_at`, a link's use
count), and reads that a kept view was read (`view_reads`: a view no buyer
ever read is dropped as soon as no buyer can read it, issue 47); `UsageWriter`, one
background thread per server process, writes those notes in batches. A request only
puts a note on a bounded queue and never waits: when the queue is full the note is
dropped and counted (`dropped`), so a store whose write lock is held (SQLite during a long ingest) costs some notes of use, never a slow or
failed request. A batch that cannot be written (the lock held past SQLite's busy
timeout) is kept and tried again with the next one: use counts are added up, so none
is lost while the process lives.

A key's `last_used_at`, and a view's `read_at`, are written at most once a
`key_every` seconds per process: a busy key or view does not turn every read into a
write. A link's every use is counted.
"""

from __future__ import annotations

import datetime as dt
import logging
import queue
import threading
import time
from dataclasses import dataclass, field

from sqlalchemy import Connection, Engine, text

from store.access import accounts, links
from store.fields import stored_now

log = logging.getLogger("lineups.usage")
#: Notes waiting to be written, at most; beyond, notes are dropped and counted.
QUEUE_SIZE = 10_000
#: Seconds between two batches (the first note of a batch waits this long at most).
FLUSH_EVERY_S = 1.0
#: A key's `last_used_at` is written at most this often (seconds) per process.
KEY_EVERY_S = 60.0
#: Keys whose last write time is remembered for `KEY_EVERY_S`; beyond, forgotten.
REMEMBERED_KEYS = 100_000
#: Seconds between two warnings about dropped notes or failed batches.
WARN_EVERY_S = 60.0


@dataclass
class Batch:
    """Notes gathered for one write: when each key was last used, and each link's
    number of uses and last use."""

    keys: dict[str, dt.datetime] = field(default_factory=dict)
    links: dict[str, tuple[int, dt.datetime]] = field(default_factory=dict)
    views: dict[int, dt.datetime] = field(default_factory=dict)

    def add(self, kind: str, ident, when: dt.datetime, uses: int = 1) -> None:
        if kind == "key":
            self.keys[ident] = max(when, self.keys.get(ident, when))
        elif kind == "view":
            self.views[ident] = max(when, self.views.get(ident, when))
        else:
            count, last = self.links.get(ident, (0, when))
            self.links[ident] = (count + uses, max(when, last))

    def merge(self, other: "Batch") -> None:
        for key_hash, when in other.keys.items():
            self.add("key", key_hash, when)
        for link_id, (uses, when) in other.links.items():
            self.add("link", link_id, when, uses)
        for view_id, when in other.views.items():
            self.add("view", view_id, when)

    def __bool__(self) -> bool:
        return bool(self.keys or self.links or self.views)


class UsageWriter:
    """One background thread that writes notes of use in batches (module docstring).
    Thread-safe; the thread starts with the first note."""

    def __init__(
        self,
        engine: Engine,
        queue_size: int = QUEUE_SIZE,
        flush_every: float = FLUSH_EVERY_S,
        key_every: float = KEY_EVERY_S,
    ):
        self._engine = engine
        self._queue: queue.Queue = queue.Queue(queue_size)
        self._flush_every = flush_every
        self._key_every = key_every
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._written: dict[tuple, float] = {}
        self._unwritten = Batch()
        self._warned = -WARN_EVERY_S
        #: Notes dropped because the queue was full; batches that failed (and wait).
        self.dropped = 0
        self.failed = 0

    # ------------------------------------------------------------ requests' side
    def key_used(self, key_hash: str) -> None:
        """Note a use of the API key whose hash is `key_hash`; never blocks."""
        if self._due(("key", key_hash)):
            self._put(("key", key_hash, stored_now()))

    def view_read(self, view_id: int) -> None:
        """Note a read of the kept view `view_id`; never blocks."""
        if self._due(("view", view_id)):
            self._put(("view", view_id, stored_now()))

    def _due(self, what: tuple) -> bool:
        """Whether `what` was not written in the last `key_every` seconds (and note
        that it is now)."""
        now = time.monotonic()
        with self._lock:
            if now - self._written.get(what, -self._key_every) < self._key_every:
                return False
            if len(self._written) >= REMEMBERED_KEYS:
                self._written.clear()  # at worst a few writes more
            self._written[what] = now
        return True

    def link_used(self, link_id: str) -> None:
        """Note a use of the share link `link_id`; never blocks."""
        self._put(("link", link_id, stored_now()))

    def _put(self, note: tuple) -> None:
        self._start()
        try:
            self._queue.put_nowait(note)
        except queue.Full:
            with self._lock:
                self.dropped += 1
            self._warn("The writer of uses is behind: %d note(s) of use dropped so far", self.dropped)

    # ------------------------------------------------------------ control
    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every note put before this call is written (for tests and a
        clean stop); False when that did not happen within `timeout` seconds."""
        done = threading.Event()
        self._start()
        try:
            self._queue.put(("flush", done, None), timeout=timeout)
        except queue.Full:
            return False
        return done.wait(timeout) and not self._unwritten

    def close(self, timeout: float = 5.0) -> None:
        """Write what is noted (for up to `timeout` seconds) and stop the thread."""
        with self._lock:
            thread = self._thread
        if thread is None:
            return
        try:
            self._queue.put(("stop", None, None), timeout=timeout)
        except queue.Full:
            return
        thread.join(timeout)

    def _start(self) -> None:
        if self._thread is not None:
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="lineups-usage", daemon=True)
                self._thread.start()

    # ------------------------------------------------------------ the thread
    def _run(self) -> None:
        while True:
            batch, markers, stop = self._gather()
            if batch or self._unwritten:
                self._write(batch)
            for done in markers:
                done.set()
            if stop:
                with self._lock:
                    self._thread = None
                return

    def _gather(self) -> tuple[Batch, list[threading.Event], bool]:
        """The notes of one batch: from the first note until `flush_every` later, or
        until a flush or stop marker arrives."""
        batch, markers = Batch(), []
        # A batch that failed is tried again after `flush_every`, new notes or not.
        deadline = time.monotonic() + self._flush_every if self._unwritten else None
        while True:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                kind, ident, when = self._queue.get(timeout=timeout)
            except queue.Empty:
                return batch, markers, False
            if kind == "stop":
                return batch, markers, True
            if kind == "flush":
                markers.append(ident)
                return batch, markers, False
            batch.add(kind, ident, when)
            if deadline is None:
                deadline = time.monotonic() + self._flush_every

    def _write(self, batch: Batch) -> None:
        self._unwritten.merge(batch)
        try:
            with self._engine.begin() as connection:
                accounts.note_key_uses(connection, self._unwritten.keys)
                links.note_link_uses(connection, self._unwritten.links)
                note_view_reads(connection, self._unwritten.views)
        except Exception as exc:  # noqa: BLE001 - kept and tried again with the next batch
            self.failed += 1
            self._warn("Could not write notes of use (%s); trying again with the next batch", type(exc).__name__)
            return
        self._unwritten = Batch()

    def _warn(self, message: str, *args) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._warned < WARN_EVERY_S:
                return
            self._warned = now
        log.warning(message, *args)


def note_view_reads(connection: Connection, read: dict[int, dt.datetime]) -> None:
    """Write when the views that are the keys of `read` were last read (naive UTC
    times; table `view_reads`); a view dropped meanwhile is no longer there to note."""
    if not read:
        return
    params = [{"view_id": view_id, "read_at": when} for view_id, when in read.items()]
    connection.execute(text("DELETE FROM view_reads WHERE view_id = :view_id"), params)
    connection.execute(
        text("INSERT INTO view_reads (view_id, read_at) SELECT id, :read_at FROM merged_views WHERE id = :view_id"),
        params,
    )
