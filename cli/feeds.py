"""`lineups feed add | list`: the data feeds (C11)."""

from __future__ import annotations

import click

from cli.main import common, table
from store.database.db import transaction
from store.intake import feeds


@click.group()
def feed() -> None:
    """Data feeds."""


@feed.command("add")
@click.argument("name")
@click.option("--port", "ports", multiple=True, required=True, metavar="LOCODE", help="A UN/LOCODE; repeat for several ports.")
@click.option("--frequency")
@click.option("--feed-type")
@click.option("--coverage-rating", type=float)
@click.option("--commodity-rating", type=float)
@click.option("--commercial-rating", type=float)
@common
def feed_add(ctx, name, ports, frequency, feed_type, coverage_rating, commodity_rating, commercial_rating):
    """Add a feed over one or more ports."""
    with transaction(ctx.sessions) as session:
        row = feeds.add_feed(
            session, name, list(ports), frequency, feed_type, coverage_rating, commodity_rating, commercial_rating
        )
        payload = {"id": row.id, "name": row.name}
    ctx.emit(payload, f"Added feed {payload['name']} ({payload['id']})")


@feed.command("list")
@common
def feed_list(ctx):
    """List every feed."""
    with transaction(ctx.sessions) as session:
        rows = [feeds.feed_dict(f) for f in feeds.list_feeds(session)]
    for row in rows:
        row["port_codes"] = ",".join(p["unlocode"] for p in row["ports"])
    ctx.emit({"feeds": rows}, lambda: table(rows, ["id", "name", "port_codes", "frequency", "feed_type"]))
