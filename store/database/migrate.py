"""Schema migrations (Alembic) for SQLite and PostgreSQL.

New stores are created through the migrations, and `lineups serve` refuses a store
whose schema is behind (`check_current`), saying what to run.

Checking a store's revision needs no Alembic, which only running the migrations
imports: every command and every server start checks it, and importing Alembic took
0.22-0.27 s of a start of 1.5-2.0 s on a slow machine (2026-11-29). The store's
revision is the row of Alembic's version table, read with a plain query; the newest
is the highest number among the migration files (`versions/NNNN_….py`), whose
revision ids are their numbers (a test holds both to Alembic's own answers).
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, inspect, text

#: The migration files.
VERSIONS = Path(__file__).resolve().parent / "migrations" / "versions"


class SchemaBehind(Exception):
    """The store's schema is older than this version of the service."""


def _config():
    """Alembic's configuration of the migrations (imports Alembic)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", "store.database:migrations")
    return config


def head_revision() -> str:
    """The newest migration this version of the service ships."""
    return max(path.name.split("_", 1)[0] for path in VERSIONS.glob("[0-9][0-9][0-9][0-9]_*.py"))


def current_revision(engine: Engine) -> str | None:
    """The migration the store is at; None for an empty store."""
    with engine.connect() as connection:
        if not inspect(connection).has_table("alembic_version"):
            return None
        return connection.scalar(text("SELECT version_num FROM alembic_version"))


def scripts():
    """Alembic's own reading of the migrations (an `alembic.script.ScriptDirectory`;
    importing Alembic is paid here): what the tests hold the revisions above to."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_config())


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Apply every migration up to `revision`."""
    from alembic import command

    config = _config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def check_current(engine: Engine, db_url: str) -> None:
    """Raise SchemaBehind unless the store is at the newest migration."""
    current, head = current_revision(engine), head_revision()
    if current != head:
        state = "empty" if current is None else f"at revision {current}"
        raise SchemaBehind(
            f"The store's schema is {state}, but this version needs {head}. "
            f"Run: lineups db upgrade --db {db_url}"
        )
