"""Waiting for a condition, the one way tests wait (issue 50.1): poll it until it
holds, for a bound generous enough for a machine at load 8 (the suite runs beside
other work), never a fixed sleep that a slow moment outlasts."""

from __future__ import annotations

import time
from typing import Callable

#: Seconds a test waits for a condition unless it says otherwise.
PATIENCE_S = 60.0


def until(condition: Callable[[], object], timeout: float = PATIENCE_S, every: float = 0.05) -> bool:
    """Poll `condition()` until it is true or `timeout` seconds have passed; return
    whether it held (the caller's assertion says what did not)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return bool(condition())
        time.sleep(every)
    return True
