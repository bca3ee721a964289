"""Who is using an explorer session, and the store they reach through it.

`ExplorerContext` is what every session of one server process shares (the
sessionmaker, the buyers' lineups (`store.views.lineups.Lineups`), the signing secrets, the
public base URL, the book of signed-in sessions). `Account` is one signed-in buyer:
every action goes through `Account.store()`, which re-reads the API key and the
buyer, and asks the session book whether this sign-in is still live, before doing
anything: a revoked key, a suspended buyer or a logout (in any tab) ends the
session on the next action.

Store work never runs on the event loop the explorer shares with the API: the
screens' models await `Account.run(work)`, which runs `work` in the context's threads
(`ExplorerContext.off_loop`) and comes back to the loop with the result (issue 17).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from typing import Any, Callable, Iterator, TypeVar

import param
from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import Session, sessionmaker

from explorer import auth, data
from store.access import accounts, signins
from store.access.usage import UsageWriter
from store.database.db import transaction
from store.errors import LineupsError
from store.intake.feeds import feed_dict
from store.views.lineups import Lineups, patiently
from store.database.schema import Buyer
from store.reference.taxonomy import Taxonomy, default_taxonomy


T = TypeVar("T")
log = logging.getLogger("lineups.explorer")
#: Seconds before an ended sign-in that the store refused is written again (doubling
#: up to `RETRY_MAX_S` while the store stays busy or away).
RETRY_S = 1.0
RETRY_MAX_S = 30.0

#: Threads that run one server process's explorer store work (a few: the API keeps
#: the loop's default executor for its own).
STORE_THREADS = 4


def store_threads() -> ThreadPoolExecutor:
    """The threads of a new `ExplorerContext` (started when first used)."""
    return ThreadPoolExecutor(max_workers=STORE_THREADS, thread_name_prefix="explorer-store")


class SessionBook:
    """The explorer's sign-ins that a logout ended (issue 17, item 5), kept in the
    store (`store.access.signins`): a session cookie names its sign-in by a random
    id; logging out records it, and every request and action asks `is_live`, in any
    server process, after a restart too.

    `end` never waits for the store, so a logout can run on the event loop while a
    writer holds the store (issue 49 item 2: it used to freeze the whole process for
    SQLite's 30 s busy timeout, then fail with the session still valid). The ended id
    is remembered at once, so this process refuses the cookie from then on, and one
    background thread writes it when the store allows, trying again every
    `retry_s` (doubling up to `RETRY_MAX_S`) while it cannot; once written it is
    forgotten here (the store has it). `is_live` blocks on the store: call it off the
    event loop."""

    def __init__(
        self, sessions: sessionmaker[Session], max_age_s: float = auth.MAX_AGE_DAYS * 86_400, retry_s: float = RETRY_S,
    ):
        self._sessions = sessions
        self._keep = dt.timedelta(seconds=max_age_s)
        self._retry_s = retry_s
        self._lock = threading.Lock()
        self._written = threading.Condition(self._lock)
        self._unwritten: set[str] = set()  # ended here, not yet in the store
        self._writing = False
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="explorer-logouts")

    def end(self, session_id: str) -> None:
        """End the sign-in `session_id`: at once in this process, in the store as
        soon as it allows. Never blocks (safe on the event loop)."""
        with self._lock:
            self._unwritten.add(session_id)
            if self._writing:
                return
            self._writing = True
        self._writer.submit(self._write_ended)

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every sign-in ended before this call is in the store (for tests
        and a clean stop); False when that did not happen within `timeout` seconds."""
        with self._written:
            return self._written.wait_for(lambda: not self._unwritten, timeout)

    def is_live(self, session_id: str) -> bool:
        """False once `session_id` was ended (here, or in the store by any process)."""
        with self._lock:
            if session_id in self._unwritten:
                return False
        with transaction(self._sessions) as session:
            return not signins.has_ended(session, session_id)

    def _write_ended(self) -> None:
        """Write every ended sign-in not yet written, until none is left (on the
        writer's thread)."""
        delay = self._retry_s
        while True:
            with self._lock:
                ended = sorted(self._unwritten)
                if not ended:
                    self._writing = False
                    return
            try:
                with transaction(self._sessions) as session:
                    for session_id in ended:
                        signins.end(session, session_id, self._keep)
            except Exception as error:  # noqa: BLE001 - the store is busy or away: kept and tried again
                log.warning("Could not record %d ended explorer sign-in(s) yet (%s); trying again in %.0f s",
                            len(ended), type(error).__name__, delay)
                time.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
                continue
            delay = self._retry_s
            with self._written:
                self._unwritten.difference_update(ended)
                self._written.notify_all()


@dataclasses.dataclass(frozen=True)
class ExplorerContext:
    """The dependencies of every explorer session in one server process."""

    sessions: sessionmaker[Session]
    service: Lineups
    secrets: tuple[str, ...]
    base_url: str
    taxonomy: Taxonomy = dataclasses.field(default_factory=default_taxonomy)
    #: Ended sign-ins (made from `sessions` when not given).
    book: SessionBook | None = None
    #: Notes of use: a sign-in's key use is written by this background writer, never
    #: while the buyer waits (issue 16 item 1; made from the engine when not given,
    #: the API's when the explorer is served beside it).
    usage: UsageWriter | None = None
    #: The threads store work runs in, off the event loop (made with the context at
    #: start-up, never at import).
    executor: ThreadPoolExecutor = dataclasses.field(default_factory=store_threads)

    def __post_init__(self) -> None:
        if self.book is None:
            object.__setattr__(self, "book", SessionBook(self.sessions))
        if self.usage is None:
            object.__setattr__(self, "usage", UsageWriter(self.sessions.kw["bind"]))

    async def off_loop(self, work: Callable[..., T], *args) -> T:
        """`work(*args)`, run in `executor` while the event loop serves others."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, partial(work, *args))


class SessionLost(Exception):
    """The store no longer accepts this session (revoked key, suspended buyer)."""


class StoreBusy(Exception):
    """The store could not do an action now: another process holds its write lock
    (SQLite during an ingest) past the action's wait, or it is out of reach. Nothing
    was changed; the buyer may try again (issue 49 item 7: it was an uncaught
    `OperationalError`, and the screen said nothing)."""

    MESSAGE = "The store is busy with another change, so nothing was changed. Please try again in a moment."

    def __init__(self, message: str = MESSAGE):
        super().__init__(message)
        self.message = message


def feed_list(session: Session, buyer_id: str) -> list[dict[str, Any]]:
    """The buyer's feeds as the API lists them (C7): active or trial subscriptions,
    ordered by name, each with its `subscription_status`."""
    return [
        {**feed_dict(e.feed), "subscription_status": e.status}
        for e in accounts.entitlements(session, buyer_id)
    ]


class Account(param.Parameterized):
    """One signed-in buyer of one explorer session."""

    context = param.ClassSelector(class_=ExplorerContext, constant=True, precedence=-1)
    buyer_id = param.String(default="", constant=True)
    key_id = param.String(default="", constant=True)
    session_id = param.String(default="", constant=True, doc="The sign-in (the cookie's), ended by a logout.")
    buyer_name = param.String(default="", constant=True)
    feeds = param.List(default=[], item_type=dict, precedence=-1, doc="""
        The buyer's feeds when the session opened (C7 source dicts).""")
    lost = param.Boolean(default=False, doc="""
        True once the store refused the session; the app then returns to the login page.""")

    @classmethod
    def open(cls, context: ExplorerContext, identity: auth.Identity) -> "Account":
        """The account of a signed-in identity. Raises SessionLost when the store no
        longer accepts it."""
        if not context.book.is_live(identity.session_id):
            raise SessionLost("You signed out")
        try:
            with transaction(context.sessions) as session:
                buyer = auth.check(session, identity)
                feeds = feed_list(session, buyer.id)
        except LineupsError as error:
            raise SessionLost(error.message) from error
        return cls(
            context=context,
            buyer_id=buyer.id,
            key_id=identity.key_id,
            session_id=identity.session_id,
            buyer_name=buyer.name,
            feeds=feeds,
        )

    @contextmanager
    def store(self) -> Iterator[tuple[Session, Buyer]]:
        """One transaction for one action, after re-checking the session against the
        store. Raises SessionLost, and sets `lost`, when the check fails."""
        if self.lost:
            raise SessionLost("This session has ended")
        try:
            with self._checked() as (session, buyer):
                yield session, buyer
        except SessionLost:
            self.lost = True
            raise

    async def run(self, work: Callable[[Session, Buyer], T]) -> T:
        """`work(session, buyer)` in one checked transaction, on the explorer's
        threads; asked again after a pause on the loop while a view it reads is being
        built by another process (`patiently`: the wait holds no thread). Raises
        SessionLost (and sets `lost`, back on the loop) when the session ended,
        StoreBusy when the store could not do it now, and whatever `work` raises."""
        if self.lost:
            raise SessionLost("This session has ended")
        try:
            return await patiently(lambda: self.context.off_loop(self._work, work))
        except SessionLost:
            self.lost = True
            raise

    def _work(self, work: Callable[[Session, Buyer], T]) -> T:
        try:
            with self._checked() as (session, buyer):
                return work(session, buyer)
        except sa_exc.OperationalError as error:  # locked (SQLite) or out of reach
            log.warning("An explorer action found the store busy (%s)", type(error.orig).__name__)
            raise StoreBusy() from error

    @contextmanager
    def _checked(self) -> Iterator[tuple[Session, Buyer]]:
        """A transaction whose session is still signed in (else SessionLost), with
        the lineup service at hand for `explorer.data`."""
        if not self.context.book.is_live(self.session_id):
            raise SessionLost("You signed out")
        with transaction(self.context.sessions) as session:
            try:
                buyer = auth.check(session, auth.Identity(self.buyer_id, self.key_id, self.session_id))
            except LineupsError as error:
                raise SessionLost(error.message) from error
            session.info[data.SERVICE] = self.context.service
            yield session, buyer

    @property
    def service(self) -> Lineups:
        return self.context.service

    @property
    def feed_names(self) -> dict[str, str]:
        return {feed["id"]: feed["name"] for feed in self.feeds}
