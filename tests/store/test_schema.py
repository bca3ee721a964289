"""The migrations make the schema the model declares (`store.database.schema`), on
SQLite and PostgreSQL: every store is created and upgraded through them, so a
difference would be a store without an index its reads and upkeep count on."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from store.database.schema import Base


def test_the_migrated_schema_is_the_declared_one(engine):
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"include_schemas": False})
        differences = compare_metadata(context, Base.metadata)
    assert differences == []
