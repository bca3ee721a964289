"""Operator commands of C11: feeds, buyers, keys, subscriptions, ingest, commodities
and the demo data set."""

from __future__ import annotations

import datetime as dt
import sys

import click
from tqdm import tqdm

from cli.main import common, lineups, table
from store.access import accounts
from store.intake import demo, feedfile, feeds, ingest, validate
from store.reference import commodities
from store.views import builds
from store.database.db import transaction
from store.fields import format_time
from store.intake.mapping import Mapping
from store.database.schema import Buyer
from sqlalchemy import select


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
        feed_name = target.name  # as stored, however the operator spelled it
        frame = ingest.read_feed_file(path, mapping)
        note = feedfile.describe(frame.attrs.get("read_as", {}))
        if note and not ctx.as_json:
            click.echo(f"{click.format_filename(path)}: {note}", err=True)
        with _progress_bar(len(frame), "ingest") as bar:
            clean = validate.validate_frame(
                frame, name=click.format_filename(path), **(mapping.parsing() if mapping else {})
            )
            report = ingest.upsert(session, target, clean, bar.update)
    payload = report.as_dict()
    ctx.emit(
        payload,
        f"Ingested into {feed_name}: {report.inserted} inserted, {report.updated} updated, "
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


@commodity.command("list")
@click.argument("search", required=False, default="")
@click.option("--tree", is_flag=True, help="Group the leaves under their group and subgroup.")
@common
def commodity_list(ctx, search, tree):
    """The taxonomy's leaves (what LEAF of `commodity map` takes), those whose name,
    alias, subgroup or group contains SEARCH when given."""
    if tree:
        groups = commodities.leaf_tree(search)
        ctx.emit({"groups": groups}, lambda: _print_tree(groups))
        return
    rows = commodities.leaf_list(search)
    ctx.emit({"commodities": rows}, lambda: table(rows, ["name", "subgroup", "group", "id"]))


def _print_tree(groups: list[dict]) -> None:
    if not groups:
        click.echo("(none)")
    for group in groups:
        click.echo(group["name"])
        for subgroup in group["subgroups"]:
            click.echo(f"  {subgroup['name']}")
            for leaf in subgroup["leaves"]:
                aliases = f"  ({', '.join(leaf['aliases'])})" if leaf["aliases"] else ""
                click.echo(f"    {leaf['name']}{aliases}")


@commodity.command("map")
@click.argument("raw")
@click.argument("leaf")
@common
def commodity_map(ctx, raw, leaf):
    """Map a raw commodity string to a taxonomy leaf (its name or id; `lineups
    commodity list` shows them)."""
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
            payload = demo.load_demo(session, records, seed, anchor, bar.update)
    keep_views(ctx, payload["buyer_id"])
    return payload


def keep_views(ctx, buyer_id: str) -> None:
    """After a change of what a buyer may see (committed): bring the buyer's merged
    views up to date (built already before a subscription change or a resume; an
    ingest may have committed since), so that their next page is read, not merged, and
    drop views that no buyer has read for the retention period (issue 15). A suspended
    buyer reads nothing: their views wait for `buyer resume`."""
    with transaction(ctx.sessions) as session:
        active = accounts.find_buyer(session, buyer_id).status == "active"
    if active:
        builds.ensure_buyer(ctx.sessions, buyer_id)
    with transaction(ctx.sessions) as session:
        builds.prune(session)


def _print_demo(payload: dict) -> None:
    click.echo(f"Demo data: {payload['records']} records in {len(payload['feeds'])} feeds")
    table(payload["feeds"], ["name", "subscription", "records"])
    click.echo(f"\nDemo buyer API key: {payload['api_key']}")


# ---------------------------------------------------------------- data quality
@lineups.group()
def quality() -> None:
    """Data quality reports."""


@quality.command("duplicates")
@click.option("--buyer", "buyer_ident", metavar="BUYER", help="One buyer (id or name); default every active buyer.")
@common
def quality_duplicates(ctx, buyer_ident):
    """Count pairs of served rows that are likely one call (same vessel, port and
    commodity subgroup, dates (the earliest of ETA, ETB, ETD) at most 3 days apart), by cause."""
    from store.merging.duplicates import CAUSES, counts
    from store.views.lineups import Lineups
    from store.views.query import LineupQuery

    with transaction(ctx.sessions) as session:
        if buyer_ident:
            chosen = [accounts.find_buyer(session, buyer_ident)]
        else:
            chosen = session.scalars(select(Buyer).where(Buyer.status == "active").order_by(Buyer.name)).all()
        buyers = [(b.id, b.name) for b in chosen]
    service = Lineups(ctx.sessions)
    report = []
    for buyer_id, name in buyers:
        rows = service.frame(buyer_id, LineupQuery())
        by_cause = counts(rows)
        report.append({"buyer_id": buyer_id, "buyer": name, "rows": len(rows), "pairs": sum(by_cause.values()), **by_cause})
    ctx.emit({"causes": list(CAUSES), "buyers": report},
             lambda: table(report, ["buyer", "rows", "pairs", *CAUSES]))
