"""The builder of waiting views (issue 47): brings into being the view that a
buyer's waiting changes need (`store.views.pending`) and switches the buyer to it.

It runs as a thread in every `lineups serve` process (`Builder`), as the command
`lineups views build` for a store with no server, and in `subscription set --wait`.
Several of them at once do each build once: a view is built under its hold
(`store.views.builds.ensure`: PostgreSQL's lock of its row, SQLite's write lock),
and a builder that finds a view held by another process leaves that buyer to the
next round (or, when told to wait, waits for it); the switch is one transaction on
the buyer's locked row, and a second switch finds nothing left to do.

A buyer who changes again while their view is being built is built for again, for
their latest wanted state: changes made in a row before the builder comes round
build one view, whatever the number of steps.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from sqlalchemy.orm import Session, sessionmaker

from store.database.db import transaction
from store.database.schema import Buyer
from store.views import builds, pending

log = logging.getLogger("lineups.views")

#: Seconds between two looks of a server's builder for waiting buyers.
POLL_S = 1.0
#: Builds of one buyer's view in a row, their wanted state changing meanwhile,
#: before the builder leaves them to its next round.
_TRIES = 3


def settle(sessions: sessionmaker[Session], buyer_id: str, wait: float = builds.WAIT_S) -> bool:
    """Build the views of the buyer's wanted state, then switch the buyer to it
    (`pending.switch`), and drop the views nobody reads any longer (`builds.prune`);
    True when nothing of theirs waits any longer. Raises `builds.ViewBusy` when
    another process holds one of those views for longer than `wait` seconds."""
    started = time.perf_counter()
    for _ in range(_TRIES):
        with transaction(sessions) as session:
            buyer = session.get(Buyer, buyer_id)
            if buyer is None:
                return True
            keys = pending.wanted(session, buyer).view_keys()
        for key in keys:
            builds.ensure(sessions, key, wait)
        with transaction(sessions) as session:
            if pending.switch(session, buyer_id):
                break
    else:
        return False
    with transaction(sessions) as session:
        builds.prune(session)
    log.info("Buyer %s switched to their wanted feeds (%d views) in %.2f s", buyer_id, len(keys),
             time.perf_counter() - started)
    return True


@dataclass
class Round:
    """What one round of the builder did: the buyers switched, and those still
    waiting (their view held by another process, or changed again meanwhile)."""

    switched: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)


def build_waiting(sessions: sessionmaker[Session], wait: float = builds.WAIT_S, buyer_id: str | None = None) -> Round:
    """`settle` every waiting buyer (or only `buyer_id`), the longest waiting first.
    With `wait=0` a buyer whose view another process holds is left waiting."""
    with transaction(sessions) as session:
        buyers = pending.waiting_buyers(session)
    done = Round()
    for waiting in buyers:
        if buyer_id is not None and waiting != buyer_id:
            continue
        try:
            switched = settle(sessions, waiting, wait)
        except builds.ViewBusy:
            switched = False
        (done.switched if switched else done.waiting).append(waiting)
    return done


class Builder:
    """A server process's builder: a thread that looks for waiting buyers every
    `poll` seconds and settles them (`build_waiting`, not waiting for views that
    another process builds). Holds nothing between rounds."""

    def __init__(self, sessions: sessionmaker[Session], poll: float = POLL_S):
        self.sessions = sessions
        self.poll = poll
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="lineups-builder", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop looking; a build under way ends with the process if it outlasts
        `timeout` (its transaction, and so its hold, ends with its connection)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self.poll):
            try:
                build_waiting(self.sessions, wait=0)
            except Exception:  # noqa: BLE001 - logged; the next round tries again
                log.exception("The view builder's round failed; trying again in %.0f s", self.poll)
