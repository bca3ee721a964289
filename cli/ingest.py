"""`lineups ingest FEED FILE`: a feed file into the store, or its report of every bad
row (C10, C11)."""

from __future__ import annotations

import click

from cli.main import common
from cli.progress import progress_bar
from store.database.db import transaction
from store.intake import feedfile, feeds, ingest, validate
from store.intake.mapping import Mapping


@click.command("ingest")
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
        with progress_bar(len(frame), "ingest") as bar:
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
