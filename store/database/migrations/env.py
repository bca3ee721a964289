"""Alembic environment of the lineup store (both SQLite and PostgreSQL).

Run through `store.database.migrate` (`lineups db upgrade`), which hands a live connection in
`config.attributes["connection"]`; nothing here reads a URL or the environment.
"""

from alembic import context

from store.database.schema import Base

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",  # SQLite alters tables by copy
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
