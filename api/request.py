"""What each request of the API carries besides its handler: its query arguments as
text, its id, and its store session."""

from __future__ import annotations

import itertools
import os
import threading
from typing import Any, Callable

from sqlalchemy.orm import Session, sessionmaker

from store.errors import ValidationError


def text_args(arguments: dict[str, list[bytes]]) -> dict[str, list[str]]:
    """Tornado's query arguments (names as latin-1 text, values as bytes) as UTF-8
    text; a name or value that is not UTF-8 is 400."""
    args: dict[str, list[str]] = {}
    for raw_name, values in arguments.items():
        try:
            name = raw_name.encode("latin-1").decode("utf-8")
            args[name] = [v.decode("utf-8") for v in values]
        except UnicodeError:
            raise ValidationError.parameter(raw_name, "not valid UTF-8") from None
    return args


class RequestIds:
    """Request ids of 32 hex digits (`X-Request-Id`): a random 64-bit prefix per
    process, drawn at the process's first id (so in a forked child its own), and a
    counter. Unique across the processes of a server and its restarts like
    `uuid4().hex`, without reading the system's random source on every request (an
    id names a request in the log; it is not a secret). Making one does nothing:
    no random draw and no fork hook at import."""

    def __init__(self) -> None:
        self._pid: int | None = None

    def _reseed(self) -> None:
        self._prefix = os.urandom(8).hex()
        self._count = itertools.count()
        self._pid = os.getpid()

    def __call__(self) -> str:
        if self._pid != os.getpid():
            self._reseed()
        return f"{self._prefix}{next(self._count) & 0xFFFFFFFFFFFFFFFF:016x}"


new_request_id = RequestIds()


class RequestSession:
    """One session per request: opened on first use in a worker thread, used by one
    thread at a time, closed after the request.

    Each step ends its transaction, which hands the connection back to the pool: a
    request waiting for a worker thread between two steps must not hold one, or a
    burst of more requests than the pool has connections leaves every thread waiting
    for a connection that only a waiting request can give back."""

    def __init__(self, factory: sessionmaker[Session]):
        self._factory = factory
        self._session: Session | None = None
        self._lock = threading.Lock()

    @property
    def opened(self) -> bool:
        return self._session is not None

    def run(self, work: Callable[..., Any], *args: Any) -> Any:
        with self._lock:
            if self._session is None:
                self._session = self._factory()
            try:
                result = work(self._session, *args)
            except BaseException:
                self._session.rollback()
                raise
            self._session.commit()  # expire_on_commit=False: what `work` returned stays loaded
            return result

    def close(self) -> None:
        with self._lock:
            if self._session is not None:
                self._session.close()
                self._session = None
