"""A process that builds a view and stops in the middle of the build, as one killed
there would: it holds whatever a build holds (`store.views.builds._hold`: PostgreSQL's
lock of the view's row, SQLite's write lock) until it is killed. For the tests of
readers that meet a build in another process (tests/store/test_views.py,
tests/api/test_lineups.py)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path
from typing import Iterator

from store.views import upkeep

ROOT = Path(__file__).resolve().parents[1]

#: Says "building" once it holds the view, then waits.
_SCRIPT = """
import sys, time
from store.database.db import make_engine, make_sessionmaker
from store.views import builds, upkeep
url, schema, mode, feeds = sys.argv[1], sys.argv[2] or None, sys.argv[3], sys.argv[4].split(",")

def paused(session, view, merges=None):
    print("building", flush=True)
    time.sleep(600)

upkeep.bring_up_to_date = paused
builds.ensure(make_sessionmaker(make_engine(url, schema=schema)), upkeep.ViewKey.of(mode, feeds))
"""


@contextlib.contextmanager
def paused_build(store_settings, key: upkeep.ViewKey) -> Iterator[subprocess.Popen]:
    """A process holding the view `key` of the store of `store_settings` in the middle
    of its build, from when it says so until the block ends (it is killed then, if
    the block has not killed it)."""
    builder = subprocess.Popen(
        [sys.executable, "-c", _SCRIPT, store_settings.db_url, store_settings.db_schema or "", key.mode,
         ",".join(key.feeds)],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert builder.stdout.readline().strip() == "building"
        yield builder
    finally:
        builder.kill()
        builder.wait(10)
        builder.stdout.close()
