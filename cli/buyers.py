"""`lineups buyer add | list | suspend | resume`: the buyers (C11)."""

from __future__ import annotations

import click

from cli.kept_views import keep_views
from cli.main import common, table
from store.access import accounts
from store.database.db import transaction
from store.views import builds


@click.group()
def buyer() -> None:
    """Buyers."""


def _buyer_payload(row) -> dict:
    return {"id": row.id, "name": row.name, "status": row.status}


@buyer.command("add")
@click.argument("name")
@common
def buyer_add(ctx, name):
    """Add a buyer."""
    with transaction(ctx.sessions) as session:
        payload = _buyer_payload(accounts.add_buyer(session, name))
    ctx.emit(payload, f"Added buyer {payload['name']} ({payload['id']})")


@buyer.command("list")
@common
def buyer_list(ctx):
    """List every buyer: id, name, status, created."""
    with transaction(ctx.sessions) as session:
        rows = [accounts.buyer_dict(row) for row in accounts.list_buyers(session)]
    ctx.emit({"buyers": rows}, lambda: table(rows, ["id", "name", "status", "created_at"]))


def _set_buyer_status(ctx, ident: str, status: str) -> None:
    if status == "active":  # resumed with their views ready (see subscription_set)
        with transaction(ctx.sessions) as session:
            buyer_id = accounts.find_buyer(session, ident).id
        builds.ensure_buyer(ctx.sessions, buyer_id)
    with transaction(ctx.sessions) as session:
        row = accounts.set_buyer_status(session, accounts.find_buyer(session, ident), status)
        payload = _buyer_payload(row)
    keep_views(ctx, payload["id"])
    ctx.emit(payload, f"Buyer {payload['name']} is {payload['status']}")


@buyer.command("suspend")
@click.argument("buyer_ident", metavar="BUYER")
@common
def buyer_suspend(ctx, buyer_ident):
    """Suspend a buyer: their keys and links stop working (403)."""
    _set_buyer_status(ctx, buyer_ident, "suspended")


@buyer.command("resume")
@click.argument("buyer_ident", metavar="BUYER")
@common
def buyer_resume(ctx, buyer_ident):
    """Resume a suspended buyer."""
    _set_buyer_status(ctx, buyer_ident, "active")
