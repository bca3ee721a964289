"""Operator commands of C11: feeds, buyers, keys, subscriptions, ingest, commodities
and the demo data set."""

from __future__ import annotations

import datetime as dt
import sys

import click
from tqdm import tqdm

from cli.main import common, lineups, table
from store import accounts, commodities, demo, feeds, ingest, validate
from store.db import transaction
from store.fields import format_time
from store.mapping import Mapping


def _progress_bar(total: int, label: str):
    """A tqdm bar on a terminal, nothing otherwise (so --json output stays clean)."""
    return tqdm(total=total, desc=label, unit="rows", disable=not sys.stderr.isatty(), file=sys.stderr)


# ---------------------------------------------------------------- feeds
@lineups.group()
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


# ---------------------------------------------------------------- buyers
@lineups.group()
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


def _set_buyer_status(ctx, ident: str, status: str) -> None:
    with transaction(ctx.sessions) as session:
        row = accounts.set_buyer_status(session, accounts.find_buyer(session, ident), status)
        payload = _buyer_payload(row)
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


# ---------------------------------------------------------------- keys
@lineups.group()
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


@key.command("revoke")
@click.argument("key_ident", metavar="KEY")
@common
def key_revoke(ctx, key_ident):
    """Revoke a key (give the key, its id or its unique prefix)."""
    with transaction(ctx.sessions) as session:
        row = accounts.revoke_key(session, accounts.find_key(session, key_ident))
        payload = {"key": None, "buyer_id": row.buyer_id, "id": row.id, "revoked_at": format_time(row.revoked_at)}
    ctx.emit(payload, f"Revoked key {row.prefix}… of buyer {payload['buyer_id']}")


# ---------------------------------------------------------------- subscriptions
@lineups.group()
def subscription() -> None:
    """Subscriptions of buyers to feeds."""


@subscription.command("set")
@click.argument("buyer_ident", metavar="BUYER")
@click.argument("feed_ident", metavar="FEED")
@click.argument("status", type=click.Choice(["active", "trial", "cancelled"], case_sensitive=False))
@common
def subscription_set(ctx, buyer_ident, feed_ident, status):
    """Set a buyer's subscription to a feed."""
    with transaction(ctx.sessions) as session:
        row = accounts.set_subscription(
            session, accounts.find_buyer(session, buyer_ident), feeds.find_feed(session, feed_ident), status
        )
        payload = {"buyer_id": row.buyer_id, "feed_id": row.feed_id, "status": row.status}
    ctx.emit(payload, f"Subscription of {payload['buyer_id']} to {payload['feed_id']}: {payload['status']}")


# ---------------------------------------------------------------- ingest
@lineups.command("ingest")
@click.argument("feed_ident", metavar="FEED")
@click.argument("path", metavar="FILE", type=click.Path(exists=True, dir_okay=False))
@click.option("--mapping", "mapping_path", type=click.Path(exists=True, dir_okay=False), help="A TOML mapping for a foreign file format.")
@common
def ingest_command(ctx, feed_ident, path, mapping_path):
    """Ingest a feed file (.csv or .jsonl). A file with any bad row is refused whole."""
    mapping = Mapping.load(mapping_path) if mapping_path else None
    with transaction(ctx.sessions) as session:
        target = feeds.find_feed(session, feed_ident)
        frame = ingest.read_feed_file(path, mapping)
        with _progress_bar(len(frame), "ingest") as bar:
            clean = validate.validate_frame(
                frame, name=click.format_filename(path), **(mapping.parsing() if mapping else {})
            )
            report = ingest.upsert(session, target, clean, bar.update)
    payload = report.as_dict()
    ctx.emit(
        payload,
        f"Ingested into {feed_ident}: {report.inserted} inserted, {report.updated} updated, "
        f"{report.unchanged} unchanged, {report.unresolved_commodities} with an unresolved commodity",
    )


# ---------------------------------------------------------------- commodities
@lineups.group()
def commodity() -> None:
    """The commodity taxonomy and its mappings."""


@commodity.command("unresolved")
@common
def commodity_unresolved(ctx):
    """Raw commodity strings that resolve to no leaf, with their counts."""
    with transaction(ctx.sessions) as session:
        rows = commodities.unresolved(session)
    ctx.emit({"unresolved": rows}, lambda: table(rows, ["raw", "count"]))


@commodity.command("map")
@click.argument("raw")
@click.argument("leaf")
@common
def commodity_map(ctx, raw, leaf):
    """Map a raw commodity string to a taxonomy leaf (its name or id)."""
    with transaction(ctx.sessions) as session:
        payload = commodities.map_commodity(session, raw, leaf)
    ctx.emit(payload, f"{payload['raw']!r} -> {payload['leaf']}: {payload['records_resolved']} records resolved")


# ---------------------------------------------------------------- demo
@lineups.command("demo")
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
        with _progress_bar(records, "demo data") as bar:
            return demo.load_demo(session, records, seed, anchor, bar.update)


def _print_demo(payload: dict) -> None:
    click.echo(f"Demo data: {payload['records']} records in {len(payload['feeds'])} feeds")
    table(payload["feeds"], ["name", "subscription", "records"])
    click.echo(f"\nDemo buyer API key: {payload['api_key']}")
