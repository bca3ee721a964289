"""`lineups buyer add | list | suspend | resume | show`: the buyers (C11). A suspension
takes effect at once; a resume once the buyer's view is ready (issue 47)."""

from __future__ import annotations

import click

from cli.kept_views import WAIT_HELP, after_change, pending_note
from cli.main import common, table
from store.access import accounts
from store.database.db import transaction
from store.database.schema import Buyer
from store.views import pending


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


def set_buyer_status(ctx, ident: str, status: str, wait: bool) -> None:
    """`buyer suspend` (at once) and `buyer resume` (once the buyer's view is ready)."""
    with transaction(ctx.sessions) as session:
        row = accounts.find_buyer(session, ident)
        pending.request_buyer_status(session, row, status)
        buyer_id = row.id
        switched = pending.switch(session, buyer_id)  # in the same transaction: at once when no view is missing
    switched = after_change(ctx, buyer_id, switched, wait)
    with transaction(ctx.sessions) as session:
        row = session.get(Buyer, buyer_id)
        payload = {**_buyer_payload(row), "pending": not switched}
    note = pending_note(switched, status != "active")
    ctx.emit(payload, f"Buyer {payload['name']} is {payload['status']} ({note})")


@buyer.command("suspend")
@click.argument("buyer_ident", metavar="BUYER")
@common
def buyer_suspend(ctx, buyer_ident):
    """Suspend a buyer: their keys and links stop working (403) at once."""
    set_buyer_status(ctx, buyer_ident, "suspended", False)


@buyer.command("resume")
@click.argument("buyer_ident", metavar="BUYER")
@click.option("--wait", is_flag=True, help=WAIT_HELP)
@common
def buyer_resume(ctx, buyer_ident, wait):
    """Resume a suspended buyer: at once when the view of their feeds is kept, else
    once it is built (they stay suspended until then)."""
    set_buyer_status(ctx, buyer_ident, "active", wait)


@buyer.command("show")
@click.argument("buyer_ident", metavar="BUYER")
@common
def buyer_show(ctx, buyer_ident):
    """What a buyer has and has asked for: status, feeds, and whether their view is ready."""
    with transaction(ctx.sessions) as session:
        payload = pending.describe(session, accounts.find_buyer(session, buyer_ident))
    ctx.emit(payload, lambda: _print_buyer(payload))


def _print_buyer(described: dict) -> None:
    wanted = "" if described["wanted_status"] == described["status"] else " (resume asked for)"
    click.echo(f"Buyer {described['name']} ({described['id']}): {described['status']}{wanted}")
    if described["switched"]:
        click.echo(f"View: {described['view']}; every change is in effect")
    else:
        click.echo(f"View: {described['view']}; changes waiting since {described['waiting_since']}"
                   " (they read their previous feeds until the switch)")
    table(described["subscriptions"], ["feed", "status", "requested", "changed_at", "feed_id"])
