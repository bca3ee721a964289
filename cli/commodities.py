"""`lineups commodity unresolved | list | map`: the commodity taxonomy and the
mappings of raw strings to it (C6)."""

from __future__ import annotations

import click

from cli.main import common, table
from store.database.db import transaction
from store.intake import commodities


@click.group()
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
