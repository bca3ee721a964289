"""`lineups quality duplicates`: data quality reports."""

from __future__ import annotations

import click
from sqlalchemy import select

from cli.main import common, table
from store.access import accounts
from store.database.db import transaction
from store.database.schema import Buyer
from store.merging.duplicates import CAUSES, counts
from store.views.lineups import Lineups
from store.query import LineupQuery


@click.group()
def quality() -> None:
    """Data quality reports."""


@quality.command("duplicates")
@click.option("--buyer", "buyer_ident", metavar="BUYER", help="One buyer (id or name); default every active buyer.")
@common
def quality_duplicates(ctx, buyer_ident):
    """Count pairs of served rows that are likely one call (same vessel, port and
    commodity subgroup, dates (the earliest of ETA, ETB, ETD) at most 3 days apart), by cause."""
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
