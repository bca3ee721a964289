"""`lineups subscription set`: what each buyer may see (C11)."""

from __future__ import annotations

import click

from cli.kept_views import keep_views
from cli.main import common
from store.access import accounts
from store.database.db import transaction
from store.intake import feeds
from store.views import builds


@click.group()
def subscription() -> None:
    """Subscriptions of buyers to feeds."""


@subscription.command("set")
@click.argument("buyer_ident", metavar="BUYER")
@click.argument("feed_ident", metavar="FEED")
@click.argument("status", type=click.Choice(["active", "trial", "cancelled"], case_sensitive=False))
@common
def subscription_set(ctx, buyer_ident, feed_ident, status):
    """Set a buyer's subscription to a feed. The change takes effect when the command
    returns: the views of the feeds the buyer will see are built first."""
    with transaction(ctx.sessions) as session:
        buyer, feed = accounts.find_buyer(session, buyer_ident), feeds.find_feed(session, feed_ident)
        buyer_id, feed_id = buyer.id, feed.id
        after = builds.feeds_after(session, buyer_id, feed_id, status) if buyer.status == "active" else set()
    # Built before the change commits (issue 15): the buyer reads their old feeds until
    # then, and their next page after it is read from ready views, never merged.
    builds.ensure_feeds(ctx.sessions, after)
    with transaction(ctx.sessions) as session:
        row = accounts.set_subscription(
            session, accounts.find_buyer(session, buyer_id), feeds.find_feed(session, feed_id), status
        )
        payload = {"buyer_id": row.buyer_id, "feed_id": row.feed_id, "status": row.status}
    keep_views(ctx, row.buyer_id)
    ctx.emit(payload, f"Subscription of {payload['buyer_id']} to {payload['feed_id']}: {payload['status']}")
