"""Limits of streamed exports (share links, C8; issue 16 item 2).

An export holds memory while it streams (the block being sent, the next one being
made, the socket's buffers), so what a client can pin is bounded three ways:

- concurrent exports per link, per buyer and per server process (`ExportLimits`):
  one more is refused with 429 RATE_LIMITED and `Retry-After` (`ExportSlots.taken`).
  The last `reserved` of the process's slots are kept for buyers with no export
  running, so that a few buyers' stalled exports cannot refuse everyone else's
  (issue 49 item 6: 16 stalled exports of three buyers answered every other buyer
  429);
- memory per export: the result is read `block_rows` rows at a time, and the next
  block is made only once the client has taken some of the current one, so that an
  export whose client reads nothing holds one small block (`BaseHandler.stream_csv`);
- progress: a client that reads nothing for `stall_s` seconds is cut off
  (`BaseHandler.stream_csv`), and its export's memory is freed;
- a client that goes away ends its export quietly: an INFO line, status 499 in the
  access log, never an ERROR traceback.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections import Counter
from typing import Callable, Iterator

from store.errors import RateLimited

#: A function that returns the next block of an export as CSV text (at most
#: `store.views.lineups.BLOCK_ROWS` rows, no header), or None after the last one.
NextBlock = Callable[[], "bytes | None"]


@dataclasses.dataclass(frozen=True)
class ExportLimits:
    """How many exports may stream at once, and how long a client may stall one."""

    per_link: int = 3
    per_buyer: int = 6
    per_process: int = 16
    #: Of `per_process`, slots that only a buyer with no export running may take.
    reserved: int = 4
    #: Seconds a client may read nothing before its export is cut off.
    stall_s: float = 10.0
    #: Rows read and made into CSV at a time (about 250 bytes each).
    block_rows: int = 2_000
    #: `Retry-After` (seconds) of an export refused for being one too many.
    retry_after_s: int = 10
    #: Bytes handed to the connection at a time; each must be taken by the client
    #: within `stall_s`.
    send_bytes: int = 256 * 1024


class ExportSlots:
    """Counts the exports streaming in this process; thread-safe."""

    def __init__(self, limits: ExportLimits = ExportLimits()):
        self.limits = limits
        self._lock = threading.Lock()
        self._links: Counter[str] = Counter()
        self._buyers: Counter[str] = Counter()
        self._all = 0

    @contextlib.contextmanager
    def taken(self, link_id: str, buyer_id: str) -> Iterator[None]:
        """A slot for one export of `link_id` (a link of `buyer_id`) while the block
        runs. Raises RateLimited when the link, the buyer or the process has as many
        exports streaming as its limit allows."""
        self._take(link_id, buyer_id)
        try:
            yield
        finally:
            with self._lock:
                self._links[link_id] -= 1
                self._buyers[buyer_id] -= 1
                self._all -= 1
                if not self._links[link_id]:
                    del self._links[link_id]
                if not self._buyers[buyer_id]:
                    del self._buyers[buyer_id]

    def _take(self, link_id: str, buyer_id: str) -> None:
        limits = self.limits
        with self._lock:
            if self._links[link_id] >= limits.per_link:
                full = f"this link has {limits.per_link} downloads running"
            elif self._buyers[buyer_id] >= limits.per_buyer:
                full = f"this account has {limits.per_buyer} downloads running"
            elif self._all >= limits.per_process or (
                self._buyers[buyer_id] and self._all >= limits.per_process - limits.reserved
            ):
                full = "the server has as many downloads running as it takes"
            else:
                self._links[link_id] += 1
                self._buyers[buyer_id] += 1
                self._all += 1
                return
        raise RateLimited(f"Too many downloads at once: {full}; retry in {limits.retry_after_s} s",
                          retry_after=limits.retry_after_s)

    @property
    def streaming(self) -> int:
        """Exports streaming now."""
        return self._all


class ExportStalled(Exception):
    """The client of a streamed export took nothing for `ExportLimits.stall_s`."""
