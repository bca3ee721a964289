"""`lineups views build | prune`: the merged views kept in the store (issue 47)."""

from __future__ import annotations

import datetime as dt

import click

from cli.main import common
from store.access import accounts
from store.database.db import transaction
from store.views import builder, builds, footprint


@click.group()
def views() -> None:
    """The merged views kept in the store."""


@views.command("build")
@click.argument("buyer_ident", metavar="[BUYER]", required=False)
@common
def views_build(ctx, buyer_ident):
    """Build the views that buyers' waiting changes need and switch those buyers to
    them (what `lineups serve` does in the background): for a store with no server."""
    buyer_id = None
    if buyer_ident:
        with transaction(ctx.sessions) as session:
            buyer_id = accounts.find_buyer(session, buyer_ident).id
    done = builder.build_waiting(ctx.sessions, buyer_id=buyer_id)
    payload = {"switched": done.switched, "waiting": done.waiting}
    ctx.emit(payload, f"{len(done.switched)} buyer(s) switched to their new views; {len(done.waiting)} still waiting")


@views.command("prune")
@click.option("--unused-for", "hours", type=click.FloatRange(min=0), default=None, metavar="HOURS",
              help=f"Drop views no buyer can read that have been unused this long (default "
                   f"{builds.RETENTION.total_seconds() / 3600:g}); 0 drops every one.")
@common
def views_prune(ctx, hours):
    """Drop the views no buyer can read: those no buyer ever read at once (as every
    command does), those read before once unused for the retention."""
    retention = builds.RETENTION if hours is None else dt.timedelta(hours=hours)
    with transaction(ctx.sessions) as session:
        dropped = builds.prune(session, retention)
    with transaction(ctx.sessions) as session:
        left = footprint.view_sizes(session)
    ctx.emit({"dropped": dropped, "views": left}, f"Dropped {dropped} view(s); {len(left)} kept")
