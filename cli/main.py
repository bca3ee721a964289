"""The `lineups` operator command line (contract C11).

Every command takes `--db URL` (default `$LINEUPS_DB`, else `sqlite:///lineups.db`)
and `--json`, which prints exactly one JSON object on stdout. Exit status: 0 on
success, 1 when the input was refused (the JSON is then the C5 error body), 2 for
usage errors.

Each command lives in a module of its own that imports what the command needs (the
store, pandas, Tornado); the group loads that module only when the command runs
(`LazyGroup`, click's pattern for lazy subcommands), so that `lineups --help` or
`lineups link list` does not pay for pandas. A new command is one line of `COMMANDS`.
"""

from __future__ import annotations

import functools
import importlib
import json
import sys
from typing import Any, Callable

import click

from store.errors import LineupsError


class Context:
    """What a command needs, made lazily so that `--help` never opens a database."""

    def __init__(self, db: str | None, as_json: bool, base_url: str | None = None):
        self.db = db
        self.as_json = as_json
        self.base_url = base_url
        self._factory = None

    @functools.cached_property
    def settings(self):
        from store.settings import Settings

        return Settings.load(db_url=self.db, base_url=self.base_url)

    def public_base_url(self) -> str:
        """The public address links are made with (`store.database.config.public_base_url`):
        this command's --base-url, else $LINEUPS_BASE_URL, else the store's base-url
        setting, else the default address."""
        from store.database import config

        return config.public_base_url(self.settings.given_base_url, self.stored_base_url, self.settings.base_url)

    def stored_base_url(self) -> str | None:
        """The store's base-url setting, or None."""
        from store.database import config
        from store.database.db import transaction

        with transaction(self.sessions) as session:
            return config.get(session, config.BASE_URL)

    @property
    def sessions(self):
        """The store's sessionmaker, opened on first use.

        A URL that is no database URL is a usage error (exit 2); a database that cannot
        be reached is reported like refused input (exit 1 and an error body), so that
        --json still prints exactly one JSON object."""
        if self._factory is None:
            from sqlalchemy.exc import ArgumentError, DBAPIError

            from store.database.db import engine_for, make_sessionmaker, open_store
            from store.database.migrate import SchemaBehind
            from store.errors import InternalError

            try:
                engine = engine_for(self.settings)
            except ArgumentError as exc:
                raise click.BadParameter(str(exc), param_hint="'--db' / LINEUPS_DB") from exc
            try:
                open_store(engine, engine.url.render_as_string(hide_password=True))
            except SchemaBehind as exc:
                raise LineupsError(str(exc)) from exc
            except DBAPIError as exc:
                where = engine.url.render_as_string(hide_password=True)
                raise InternalError(f"Cannot open the database {where}: {exc.orig}") from exc
            self._factory = make_sessionmaker(engine)
        return self._factory

    def emit(self, payload: dict[str, Any], human: Callable[[], None] | str | None = None) -> None:
        """Print `payload` as one JSON object under --json, else the human form."""
        if self.as_json:
            click.echo(json.dumps(payload, ensure_ascii=False, default=str))
        elif callable(human):
            human()
        elif human is not None:
            click.echo(human)
        else:
            click.echo(json.dumps(payload, ensure_ascii=False, indent=2, default=str))


def common(command: Callable) -> Callable:
    """Add --db/--json to a command, pass it a Context, and turn LineupsError into
    exit status 1 with the contract's error body."""

    @click.option("--db", "db", metavar="URL", default=None, help="Database URL (default $LINEUPS_DB or sqlite:///lineups.db).")
    @click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object.")
    @functools.wraps(command)
    def wrapper(db, as_json, **kwargs):
        ctx = Context(db, as_json, kwargs.pop("base_url", None))
        try:
            return command(ctx, **kwargs)
        except LineupsError as exc:
            fail(ctx, exc)
        except Exception as exc:
            busy = _store_busy(exc)
            if busy is None:
                raise
            fail(ctx, busy)

    return wrapper


def _store_busy(exc: Exception) -> LineupsError | None:
    """SQLite's one writer: another command (a large ingest, a view build) held the
    store for longer than this one waits. Its transaction rolled back."""
    from sqlalchemy.exc import OperationalError

    from store.database.db import SQLITE_BUSY_S
    from store.errors import InternalError

    if not isinstance(exc, OperationalError) or "database is locked" not in str(exc.orig):
        return None
    return InternalError(
        f"The store is busy with another write (a large ingest or a view build) and this command waited "
        f"{SQLITE_BUSY_S:g} s for it: nothing was changed; run it again when that write is done."
    )


def fail(ctx: Context, exc: LineupsError) -> None:
    """Report refused input and exit 1."""
    if ctx.as_json:
        click.echo(exc.to_json().decode("utf-8"))
    else:
        click.echo(f"Error ({exc.code}): {exc.message}", err=True)
        details = exc.details
        if isinstance(details, list):
            for item in details[:200]:
                field = f": {item['field']}:" if item.get("field") else ""
                click.echo(f"  line {item.get('line')}{field} {item.get('reason')}", err=True)
            if len(details) > 200:
                click.echo(f"  … and {len(details) - 200} more (use --json for all)", err=True)
        elif isinstance(details, dict) and details.get("reason") and details["reason"] not in exc.message:
            click.echo(f"  {details.get('parameter')}: {details['reason']}", err=True)
    sys.exit(1)


def table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    """A plain text table of `rows`."""
    if not rows:
        click.echo("(none)")
        return
    cells = [[("" if r.get(c) is None else str(r.get(c))) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    click.echo("  ".join("-" * w for w in widths))
    for row in cells:
        click.echo("  ".join(v.ljust(w) for v, w in zip(row, widths)))


#: Every command of `lineups`: its name, where it is ("module:object", imported when
#: the command runs) and the summary `lineups --help` shows for it (the first sentence
#: of its help; tests/cli/test_cli_startup.py checks that they agree).
COMMANDS: dict[str, tuple[str, str]] = {
    "buyer": ("cli.buyers:buyer", "Buyers."),
    "commodity": ("cli.commodities:commodity", "The commodity taxonomy and its mappings."),
    "config": ("cli.config:config_group", "Settings kept in the store, shared by every command and server process."),
    "db": ("cli.database:db", "The store's schema."),
    "demo": ("cli.demo:demo_command", "Load the demo data set into an empty store and print its API key."),
    "feed": ("cli.feeds:feed", "Data feeds."),
    "ingest": ("cli.ingest:ingest_command", "Ingest a feed file (.csv or .jsonl)."),
    "key": ("cli.keys:key", "API keys."),
    "link": ("cli.links:link", "Share links: signed CSV URLs that spreadsheets import."),
    "quality": ("cli.quality:quality", "Data quality reports."),
    "serve": ("cli.serve:serve", "Serve the REST API."),
    "subscription": ("cli.subscriptions:subscription", "Subscriptions of buyers to feeds."),
    "sync": ("cli.sync:sync_command", "Bring FILE's table to the result of QUERY (as in a URL: port=NLRTM&latest=true) through the change feed, in one transaction."),
    "views": ("cli.views:views", "The merged views kept in the store."),
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported when one runs (`lazy`: name ->
    ("module:object", summary)); its help lists them from their summaries."""

    def __init__(self, *args, lazy: dict[str, tuple[str, str]], **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.lazy:
            return super().get_command(ctx, cmd_name)
        module, _, name = self.lazy[cmd_name][0].partition(":")
        return getattr(importlib.import_module(module), name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names))
        # Shortened as click shortens a loaded command's help for this list.
        rows = [(name, click.Command(name, help=self.summary(ctx, name)).get_short_help_str(limit)) for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def summary(self, ctx: click.Context, cmd_name: str) -> str:
        """What the help says of a command, without importing a lazy one."""
        if cmd_name in self.lazy:
            return self.lazy[cmd_name][1]
        return super().get_command(ctx, cmd_name).get_short_help_str(limit=1000)


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
def lineups() -> None:
    """Operate the lineup service: feeds, buyers, keys, subscriptions, ingest,
    commodities, share links, demo data, and the server."""


def main() -> None:
    lineups(prog_name="lineups")


if __name__ == "__main__":  # pragma: no cover
    main()
