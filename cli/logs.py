"""The server's log lines: `time level [pid] logger: message`, to stderr, with API
keys and share-link tokens masked whichever library wrote them.

The time of a line is formatted once per second, not once per line: the access log
writes a line for every request on the event loop, and `time.strftime` was a good
part of its cost.
"""

from __future__ import annotations

import logging
import time

LOG_FORMAT = "%(asctime)s %(levelname)s [%(process)d] %(name)s: %(message)s"


class SecondFormatter(logging.Formatter):
    """`logging.Formatter` whose `asctime` text (local time, `,msecs`) is the
    standard one, its seconds part kept while the second lasts."""

    def __init__(self, fmt: str = LOG_FORMAT):
        super().__init__(fmt)
        self._second = -1
        self._text = ""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        second = int(record.created)
        if second != self._second:  # a race here only formats the same second twice
            self._text = time.strftime(self.default_time_format, self.converter(record.created))
            self._second = second
        return self.default_msec_format % (self._text, record.msecs)


def configure(level: int = logging.INFO) -> None:
    """Log lines at `level` and above to stderr, as `LOG_FORMAT`, every one with keys
    and tokens masked (`api.redaction`, C8; issue 16 item 7)."""
    from api.redaction import RedactingFilter

    handler = logging.StreamHandler()
    handler.setFormatter(SecondFormatter())
    handler.addFilter(RedactingFilter())
    logging.basicConfig(level=level, handlers=[handler])
