"""`lineups db upgrade | status`: the store's schema migrations (Alembic)."""

from __future__ import annotations

import click

from cli.main import common
from store.database.db import SQLITE_PAGE_BYTES, create_schema, engine_for, sqlite_page_bytes
from store.database.migrate import current_revision, head_revision


@click.group()
def db() -> None:
    """The store's schema."""


@db.command("upgrade")
@common
def db_upgrade(ctx):
    """Apply every migration the store lacks (creates a new store)."""
    engine = engine_for(ctx.settings)
    try:
        before = current_revision(engine)
        create_schema(engine)
        payload = {"from": before, "to": current_revision(engine)}
    finally:
        engine.dispose()  # no connection left open behind the command
    ctx.emit(payload, f"Schema: {before or 'empty'} -> {payload['to']}")


@db.command("status")
@common
def db_status(ctx):
    """Say which migration the store is at and which this version needs (on SQLite
    also its page size: a store made before 2026-11-29 has 4 KiB pages, which make
    daily updates slower, until it is converted as docs/deploying.md says)."""
    engine = engine_for(ctx.settings)
    try:
        payload = {"current": current_revision(engine), "head": head_revision()}
        page_bytes = sqlite_page_bytes(engine)
    finally:
        engine.dispose()
    payload["up_to_date"] = payload["current"] == payload["head"]
    text = f"Store at {payload['current'] or 'empty'}; this version needs {payload['head']}"
    if page_bytes is not None:
        payload["sqlite_page_bytes"] = page_bytes
        if page_bytes < SQLITE_PAGE_BYTES:
            text += (f"\nSQLite pages of {page_bytes:,} bytes: stores made now have {SQLITE_PAGE_BYTES:,}, which make"
                     " daily updates faster (docs/deploying.md, \"SQLite's page size\", says how to convert)")
    ctx.emit(payload, text)
