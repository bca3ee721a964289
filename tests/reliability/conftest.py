"""Fixtures of the load and fault tests (issue 9): `lineups serve` processes over a
store with the demo data set, and the soak's load generator and contract checks
(`bench.soak`, `bench.soak_checks`), which these tests run in a short mode.

The servers are started by tests/production's `served` fixture, a private Redis by
its `own_redis`; the store is this test's fresh SQLite store (tests/conftest.py)
filled by the demo loader. Durations can be raised for a longer run by hand:
`LINEUPS_SOAK_SECONDS`, `LINEUPS_EXPORT_RECORDS`, `LINEUPS_EXPORT_SECONDS`.
"""

from __future__ import annotations

import datetime as dt
import os

import pytest

from bench import soak as soak_module
from store.database.db import transaction
from tests.production.conftest import served, store_env  # noqa: F401 - fixtures
from tests.production.test_shared_limits import own_redis  # noqa: F401 - fixture

#: The demo's calls are placed around today, as `lineups serve --demo` places them: the
#: explorer opens on calls from today on, so a fixed day would empty it as time passes.
ANCHOR = dt.datetime.now(dt.timezone.utc).date()
#: Requests a minute per key of the servers `demo_store` prepares (the contract's).
RATE_LIMIT = 100
#: The secret `store_env` gives the servers (the links must be signed with it).
SECRET = "test-secret-with-at-least-32-characters"


def seconds_setting(name: str, default: float) -> float:
    return float(os.environ.get(name) or default)


@pytest.fixture
def backend() -> str:
    """The load tests run on SQLite (PostgreSQL restarts: tests/production)."""
    return "sqlite"


@pytest.fixture
def demo_store(sessions, store_settings):
    """Returns `load(records)`: the demo data set loaded into this test's store;
    it gives the demo payload plus `env` for `lineups serve` at the contract's rate
    limit (100 a minute per key)."""

    def load(records: int) -> dict:
        from store.intake.demo import load_demo

        with transaction(sessions) as session:
            payload = load_demo(session, records, seed=7, anchor=ANCHOR)
        env = store_env(store_settings.db_url, store_settings.db_schema, LINEUPS_RATE_LIMIT=str(RATE_LIMIT))
        return {**payload, "env": env}

    return load


@pytest.fixture
def soak():
    """The soak module (bench/soak.py)."""
    return soak_module


@pytest.fixture
def soak_exports():
    """The soak's concurrent-exports check (`export_window`, bench/soak.py)."""
    return soak_module
