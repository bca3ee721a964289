"""`lineups db upgrade | status`: the store's schema migrations (Alembic)."""

from __future__ import annotations

from cli.main import common, lineups
from store.database.db import create_schema, engine_for
from store.database.migrate import current_revision, head_revision


@lineups.group()
def db() -> None:
    """The store's schema."""


@db.command("upgrade")
@common
def db_upgrade(ctx):
    """Apply every migration the store lacks (creates a new store)."""
    engine = engine_for(ctx.settings)
    before = current_revision(engine)
    create_schema(engine)
    payload = {"from": before, "to": current_revision(engine)}
    ctx.emit(payload, f"Schema: {before or 'empty'} -> {payload['to']}")


@db.command("status")
@common
def db_status(ctx):
    """Say which migration the store is at and which this version needs."""
    engine = engine_for(ctx.settings)
    payload = {"current": current_revision(engine), "head": head_revision()}
    payload["up_to_date"] = payload["current"] == payload["head"]
    ctx.emit(payload, f"Store at {payload['current'] or 'empty'}; this version needs {payload['head']}")
