"""`lineups key create | list | revoke`: the buyers' API keys (C5, C11)."""

from __future__ import annotations

import click

from cli.main import common, table
from store.access import accounts
from store.database.db import transaction
from store.fields import format_time


@click.group()
def key() -> None:
    """API keys."""


@key.command("create")
@click.argument("buyer_ident", metavar="BUYER")
@common
def key_create(ctx, buyer_ident):
    """Create an API key. It is shown this once; only its hash is stored."""
    with transaction(ctx.sessions) as session:
        text, row = accounts.create_key(session, accounts.find_buyer(session, buyer_ident))
        payload = {"key": text, "buyer_id": row.buyer_id, "id": row.id, "prefix": row.prefix}
    ctx.emit(payload, f"API key for buyer {payload['buyer_id']}: {text}\nStore it now: it is not shown again.")


@key.command("list")
@click.argument("buyer_ident", metavar="BUYER")
@common
def key_list(ctx, buyer_ident):
    """List a buyer's API keys by id and prefix, with created, last used and revoked
    (the keys themselves are shown only when created)."""
    with transaction(ctx.sessions) as session:
        buyer = accounts.find_buyer(session, buyer_ident)
        rows = [accounts.key_dict(row) for row in accounts.list_keys(session, buyer.id)]
        payload = {"buyer_id": buyer.id, "keys": rows}
    ctx.emit(payload, lambda: table(rows, ["id", "prefix", "created_at", "last_used_at", "revoked_at"]))


@key.command("revoke")
@click.argument("key_ident", metavar="KEY")
@common
def key_revoke(ctx, key_ident):
    """Revoke a key (give the key, its id or its unique prefix)."""
    with transaction(ctx.sessions) as session:
        row = accounts.revoke_key(session, accounts.find_key(session, key_ident))
        payload = {"key": None, "buyer_id": row.buyer_id, "id": row.id, "revoked_at": format_time(row.revoked_at)}
    ctx.emit(payload, f"Revoked key {row.prefix}… of buyer {payload['buyer_id']}")
