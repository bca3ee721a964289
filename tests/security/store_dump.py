"""The whole content of a store as text, for checks that a secret is not at rest.

SQLite: the SQL dump of the file (`iterdump`, every table, index and row).
PostgreSQL: every row of every table of the test's schema, each cast to text (a row
cast to text holds all its columns, JSON ones included).
"""

from __future__ import annotations

import sqlite3

from sqlalchemy import text

from store.database.db import engine_for
from store.settings import sqlite_path


def dump_store(settings) -> str:
    """Every table and row of the store of `settings`, as one text."""
    path = sqlite_path(settings.db_url)
    if path is not None:
        with sqlite3.connect(path) as connection:
            return "\n".join(connection.iterdump())
    engine = engine_for(settings)
    try:
        with engine.connect() as connection:
            tables = connection.execute(
                text("SELECT table_name FROM information_schema.tables WHERE table_schema = :schema"),
                {"schema": settings.db_schema},
            ).scalars().all()
            assert tables, "no tables found: the dump would prove nothing"
            lines = []
            for table in tables:
                rows = connection.execute(text(f'SELECT CAST(t AS text) FROM "{settings.db_schema}"."{table}" AS t'))
                lines += [f"{table}: {row}" for (row,) in rows]
            return "\n".join(lines)
    finally:
        engine.dispose()
