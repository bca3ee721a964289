"""Fixtures of the fuzzing tests: the API tests' live servers and hand-made data
(tests/api/conftest.py), on SQLite and PostgreSQL."""

from __future__ import annotations

from tests.api.conftest import fresh_tiny, fresh_tiny_api, make_api  # noqa: F401 - fixtures
