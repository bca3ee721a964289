"""`lineups db upgrade | status`: the store's schema migrations (Alembic)."""

from __future__ import annotations

import click

from cli.main import common, table
from store.database.db import (
    SQLITE_PAGE_BYTES, create_schema, engine_for, make_sessionmaker, sqlite_page_bytes, transaction,
)
from store.database.migrate import current_revision, head_revision
from store.views.footprint import view_sizes


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
    daily updates slower, until it is converted as docs/deploying.md says), and, on
    a store at this version, the kept views: rows, estimated size, last read."""
    engine = engine_for(ctx.settings)
    try:
        payload = {"current": current_revision(engine), "head": head_revision()}
        page_bytes = sqlite_page_bytes(engine)
        payload["up_to_date"] = payload["current"] == payload["head"]
        if payload["up_to_date"]:
            with transaction(make_sessionmaker(engine)) as session:
                payload["views"] = view_sizes(session)
    finally:
        engine.dispose()
    text = f"Store at {payload['current'] or 'empty'}; this version needs {payload['head']}"
    if page_bytes is not None:
        payload["sqlite_page_bytes"] = page_bytes
        if page_bytes < SQLITE_PAGE_BYTES:
            text += (f"\nSQLite pages of {page_bytes:,} bytes: stores made now have {SQLITE_PAGE_BYTES:,}, which make"
                     " daily updates faster (docs/deploying.md, \"SQLite's page size\", says how to convert)")
    views = payload.get("views")
    if views:
        text += f"\nKept views ({sum(v['bytes'] or 0 for v in views) / 2**20:,.1f} MiB estimated):"
    ctx.emit(payload, lambda: _print_status(text, views))


def _print_status(text: str, views: list[dict] | None) -> None:
    click.echo(text)
    if views:
        table(views, ["id", "mode", "feeds", "state", "rows", "bytes", "read_at", "unused_since"])
