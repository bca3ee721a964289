"""`lineups subscription set | list`: what each buyer may see, and has asked for
(C11, issue 47).

A change that gives a buyer a feed is committed as what they want and the command
returns at once; the buyer reads their previous feeds until the view of their new
ones is ready and they are switched to it (`store.views.pending`), by a server's
builder or `lineups views build`, or by the command itself with `--wait`. A
cancellation takes effect at once.
"""

from __future__ import annotations

import click
from sqlalchemy import select

from cli.kept_views import WAIT_HELP, after_change, pending_note
from cli.main import common, table
from store.access import accounts
from store.database.db import transaction
from store.database.schema import Buyer
from store.intake import feeds
from store.views import pending


@click.group()
def subscription() -> None:
    """Subscriptions of buyers to feeds."""


@subscription.command("set")
@click.argument("buyer_ident", metavar="BUYER")
@click.argument("feed_idents", metavar="FEED... STATUS", nargs=-1, required=True)
@click.option("--wait", is_flag=True, help=WAIT_HELP)
@common
def subscription_set(ctx, buyer_ident, feed_idents, wait):
    """Set a buyer's subscriptions to one or more feeds to STATUS (active, trial or
    cancelled). A cancellation takes effect at once; a feed the buyer gains takes
    effect once the view of their new feeds is built (by `lineups serve` or `lineups
    views build`; at once when it is kept already), and the command returns without
    waiting for it unless --wait is given. Changes in a row build one view."""
    if len(feed_idents) < 2:
        raise click.UsageError("give one or more FEEDs, then a STATUS (active, trial or cancelled)")
    *feed_idents, status = feed_idents
    if status.lower() not in accounts.SUBSCRIPTION_STATUSES:
        raise click.BadParameter(f"{status!r} is not one of active, trial, cancelled", param_hint="STATUS")
    with transaction(ctx.sessions) as session:
        row = accounts.find_buyer(session, buyer_ident)
        chosen = [feeds.find_feed(session, ident) for ident in feed_idents]
        pending.request_subscriptions(session, row, chosen, status)
        buyer_id, feed_ids = row.id, list(dict.fromkeys(feed.id for feed in chosen))
        switched = pending.switch(session, buyer_id)  # in the same transaction: at once when no view is missing
    switched = after_change(ctx, buyer_id, switched, wait)
    status = status.lower()
    payload = {"buyer_id": buyer_id, "feed_id": feed_ids[0], "status": status, "feed_ids": feed_ids,
               "pending": not switched}
    note = pending_note(switched, status == "cancelled")
    ctx.emit(payload, f"Subscription of {buyer_id} to {', '.join(feed_ids)}: {status} ({note})")


@subscription.command("list")
@click.argument("buyer_ident", metavar="[BUYER]", required=False)
@common
def subscription_list(ctx, buyer_ident):
    """Every buyer's subscriptions (or one buyer's): the status in effect, the status
    asked for that waits for the buyer's view, and whether that view is ready."""
    with transaction(ctx.sessions) as session:
        if buyer_ident:
            chosen = [accounts.find_buyer(session, buyer_ident)]
        else:
            chosen = session.scalars(select(Buyer).order_by(Buyer.name)).all()
        buyers = [pending.describe(session, row) for row in chosen]
    rows = [
        {"buyer": b["name"], "buyer_status": b["status"], "view": b["view"], **s}
        for b in buyers for s in b["subscriptions"]
    ]
    ctx.emit({"buyers": buyers}, lambda: table(rows, ["buyer", "buyer_status", "feed", "status", "requested", "view"]))
