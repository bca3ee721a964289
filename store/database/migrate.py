"""Schema migrations (Alembic) for SQLite and PostgreSQL.

New stores are created through the migrations, and `lineups serve` refuses a store
whose schema is behind (`check_current`), saying what to run.
"""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine


class SchemaBehind(Exception):
    """The store's schema is older than this version of the service."""


def _config(connection=None) -> Config:
    config = Config()
    config.set_main_option("script_location", "store.database:migrations")
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The newest migration this version of the service ships."""
    return ScriptDirectory.from_config(_config()).get_current_head()


def current_revision(engine: Engine) -> str | None:
    """The migration the store is at; None for an empty store."""
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Apply every migration up to `revision`."""
    with engine.begin() as connection:
        command.upgrade(_config(connection), revision)


def check_current(engine: Engine, db_url: str) -> None:
    """Raise SchemaBehind unless the store is at the newest migration."""
    current, head = current_revision(engine), head_revision()
    if current != head:
        state = "empty" if current is None else f"at revision {current}"
        raise SchemaBehind(
            f"The store's schema is {state}, but this version needs {head}. "
            f"Run: lineups db upgrade --db {db_url}"
        )
