"""`lineups sync`: keep a local SQLite file equal to a query of a lineup service, for a
buyer's cron job (issue 46; `client.sync`). It talks to the service over HTTP with the
buyer's key; it opens no store of its own (so it takes no `--db`)."""

from __future__ import annotations

import dataclasses
import json
import sys
from urllib.parse import parse_qsl

import click

from client import ApiError, Client


@click.command("sync")
@click.option("--url", required=True, envvar="LINEUPS_URL", help="The service's base URL (or $LINEUPS_URL).")
@click.option("--key", required=True, envvar="LINEUPS_API_KEY", help="The buyer's API key (or $LINEUPS_API_KEY).")
@click.option("--to", "path", required=True, metavar="FILE", help="The SQLite file to keep (made when missing).")
@click.option("--table", default="lineups", show_default=True, help="The table in it.")
@click.option("--parquet", metavar="FILE", default=None, help="Also write the table to this Parquet file.")
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object.")
@click.argument("query", required=False, default="")
def sync_command(url, key, path, table, parquet, as_json, query):
    """Bring FILE's table to the result of QUERY (as in a URL: port=NLRTM&latest=true)
    through the change feed, in one transaction."""
    filters = dict(parse_qsl(query, keep_blank_values=True))
    try:
        report = Client(url, key, progress=not as_json and sys.stderr.isatty()).sync(path, table, parquet, **filters)
    except ApiError as error:
        body = {"error": {"code": error.code, "message": error.message, "details": error.details}}
        click.echo(json.dumps(body) if as_json else f"Error ({error.code}): {error.message}", err=not as_json)
        sys.exit(1)
    payload = dataclasses.asdict(report)
    if as_json:
        click.echo(json.dumps(payload))
    else:
        click.echo(f"{table}: {report.rows} rows ({report.upserted} upserted, {report.deleted} deleted, {report.pages} pages"
                   + (", started over" if report.restarted else "") + ")")
