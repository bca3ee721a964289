"""`lineups demo`: the demo data set in an empty store (C10)."""

from __future__ import annotations

import datetime as dt

import click

from cli.kept_views import keep_views
from cli.main import common, table
from cli.progress import progress_bar
from store.database.db import transaction
from store.intake import demo


@click.command("demo")
@click.option("--records", default=5000, show_default=True, type=click.IntRange(10, 5_000_000))
@click.option("--seed", default=7, show_default=True, type=int)
@click.option("--anchor-date", type=click.DateTime(["%Y-%m-%d"]), help="The demo's 'today' (default: today, UTC).")
@common
def demo_command(ctx, records, seed, anchor_date):
    """Load the demo data set into an empty store and print its API key."""
    payload = run_demo(ctx, records, seed, anchor_date.date() if anchor_date else None)
    ctx.emit(payload, lambda: _print_demo(payload))


def run_demo(ctx, records: int, seed: int, anchor: dt.date | None) -> dict:
    """Load the demo set; refuses a store that already has a Demo Buyer."""
    with transaction(ctx.sessions) as session:
        with progress_bar(records, "demo data") as bar:
            payload = demo.load_demo(session, records, seed, anchor, bar.update)
    keep_views(ctx, payload["buyer_id"])
    return payload


def _print_demo(payload: dict) -> None:
    click.echo(f"Demo data: {payload['records']} records in {len(payload['feeds'])} feeds")
    table(payload["feeds"], ["name", "subscription", "records"])
    click.echo(f"\nDemo buyer API key: {payload['api_key']}")
