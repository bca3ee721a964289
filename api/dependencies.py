"""What the API's handlers need, built once per server process by `api.app.make_app`
and handed to every handler through `initialize()`, never as globals."""

from __future__ import annotations

import dataclasses
import os
import threading
from concurrent.futures import Executor, ThreadPoolExecutor

from sqlalchemy.orm import Session, sessionmaker

from api.cursors import CursorCodec
from api.exports import ExportSlots
from api.ratelimit import Limiter
from store.access.usage import UsageWriter
from store.database.db import Reads
from store.settings import Settings
from store.views.lineups import Lineups

#: Threads per process that make the CSV blocks of exports, all exports together: one,
#: so that exports queue for it rather than crowd the event loop out of the GIL.
EXPORT_WORKERS = 1

#: How much lower the operating system schedules export threads than the rest of the
#: process (a nice increment; Linux schedules each thread on its own).
EXPORT_NICENESS = 10


def bulk_priority() -> None:
    """Run the calling thread at a lower CPU priority (`EXPORT_NICENESS`): an export
    is bulk work, and when the cores are busy the event loop and the other requests'
    threads should run first. Where a thread's priority cannot be set, nothing."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), EXPORT_NICENESS)
    except (AttributeError, OSError):  # not Linux, or not allowed
        pass


@dataclasses.dataclass(frozen=True)
class Dependencies:
    """What the handlers need; built once by `api.app.make_app`."""

    settings: Settings
    sessions: sessionmaker[Session]
    limiter: Limiter
    executor: Executor
    cursors: CursorCodec
    #: Notes of use (keys' `last_used_at`, links' use counts), written by a
    #: background thread, never on the request path (issue 16 item 1; made from
    #: the engine of `sessions` when not given).
    usage: UsageWriter | None = None
    #: Where pure reads go (`store.database.db.Reads`: read replicas, else the primary; made
    #: from `sessions` when not given).
    reads: Reads | None = None
    #: Threads that make CSV blocks of exports (C8, C9): few and apart from `executor`,
    #: so that long exports neither queue ahead of other requests' store work nor
    #: crowd the event loop out of the GIL (made when not given).
    exports: Executor | None = None
    #: The buyers' lineups: SQL over the kept views (made from `sessions` and `reads`).
    lineups: Lineups | None = None
    #: Exports streaming now, and their limits (issue 16 item 2; made when not given).
    export_slots: ExportSlots | None = None

    def __post_init__(self) -> None:
        if self.exports is None:
            exports = ThreadPoolExecutor(EXPORT_WORKERS, thread_name_prefix="lineups-export", initializer=bulk_priority)
            object.__setattr__(self, "exports", exports)
        if self.export_slots is None:
            object.__setattr__(self, "export_slots", ExportSlots())
        if self.usage is None:
            object.__setattr__(self, "usage", UsageWriter(self.sessions.kw["bind"]))
        if self.reads is None:
            object.__setattr__(self, "reads", Reads(self.sessions))
        if self.lineups is None:
            # wait=0: a read of a view being built elsewhere waits off the threads (`BaseHandler.blocking`)
            object.__setattr__(self, "lineups", Lineups(self.sessions, self.reads, wait=0, noted=self.usage.view_read))
