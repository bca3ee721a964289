"""`lineups config list | get | set | unset`: settings kept in the store (issue 18.6;
`store.database.config` says which and how they are found)."""

from __future__ import annotations

import click

from cli.main import common, table
from store.database import config
from store.database.db import transaction


@click.group("config")
def config_group() -> None:
    """Settings kept in the store, shared by every command and server process."""


@config_group.command("list")
@common
def config_list(ctx):
    """Every setting and its stored value."""
    with transaction(ctx.sessions) as session:
        values = config.every(session)
    rows = [{"name": name, "value": value} for name, value in values.items()]
    ctx.emit({"settings": values}, lambda: table(rows, ["name", "value"]))


@config_group.command("get")
@click.argument("name")
@common
def config_get(ctx, name):
    """The stored value of a setting (null when it is not set)."""
    with transaction(ctx.sessions) as session:
        value = config.get(session, name)
    ctx.emit({"name": name, "value": value}, value if value is not None else f"{name} is not set")


@config_group.command("set")
@click.argument("name")
@click.argument("value")
@common
def config_set(ctx, name, value):
    """Store a setting, e.g. `lineups config set base-url https://lineups.example.com`."""
    with transaction(ctx.sessions) as session:
        stored = config.put(session, name, value)
    ctx.emit({"name": name, "value": stored}, f"{name} = {stored}")


@config_group.command("unset")
@click.argument("name")
@common
def config_unset(ctx, name):
    """Forget a setting, so that its default applies again."""
    with transaction(ctx.sessions) as session:
        config.remove(session, name)
    ctx.emit({"name": name, "value": None}, f"{name} is not set")
