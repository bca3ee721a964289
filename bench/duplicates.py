"""Likely duplicates among the demo buyer's rows, by cause, before and after issue 19.

    python -m bench duplicates [--records 5000] [--anchor-date 2026-11-25]

Loads the demo data set into a temporary SQLite store and merges the demo buyer's
records (`merge=all`) twice: as C2 stood before issue 19 (nothing resolved:
`store.merging.resolve.resolve` replaced by the identity) and with its rules 1 and 2;
counts the pairs of rows that are likely one call (`store.merging.duplicates`, the
definition `lineups quality duplicates` and the explorer's flags use) by cause.
"""

from __future__ import annotations

import datetime as dt
import tempfile
from unittest import mock

import pandas as pd

from bench.figures import Figure, Run, command
from store.access import accounts
from store.database.db import create_schema, make_engine, make_sessionmaker, transaction
from store.intake.demo import load_demo
from store.merging import merge as engine
from store.merging.duplicates import CAUSES, counts
from store.views.records import load_records
from store.merging.resolve import Resolution


def _as_before(records: pd.DataFrame, identities=None) -> Resolution:
    """C2 before issue 19: nothing resolved."""
    none = pd.Series(None, index=records.index, dtype=object)
    return Resolution(records, none, none.copy(), identities)


def measure(records: int, seed: int, anchor: dt.date) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        sessions = make_sessionmaker(make_engine(f"sqlite:///{folder}/demo.db"))
        create_schema(sessions.kw["bind"])
        with transaction(sessions) as session:
            payload = load_demo(session, records, seed, anchor)
        with transaction(sessions) as session:
            feeds = [f.id for f in accounts.entitled_feeds(session, payload["buyer_id"])]
            frame = load_records(session, feeds)
    out = {"demo_records": payload["records"], "records": len(frame), "seed": seed, "anchor": anchor.isoformat()}
    with mock.patch.object(engine, "resolve", _as_before):
        before = engine.merge(frame, "all")
    after = engine.merge(frame, "all")
    out["before"], out["after"] = counts(before), counts(after)
    out["before_rows"], out["after_rows"] = len(before), len(after)
    return out


def figures_of(result: dict) -> list[Figure]:
    section = f"Duplicates (demo data, {result['records']:,} of the buyer's records)"
    before, after = sum(result["before"].values()), sum(result["after"].values())
    return [
        Figure("duplicates.before", section, "pairs of rows likely one call, before issue 19 (C2 alone)", "pairs", [before]),
        Figure("duplicates.after", section, "pairs of rows likely one call, with identity resolved", "pairs", [after]),
        *(Figure(f"duplicates.after.{cause.replace(' ', '_')}", section, f"of which: {cause}", "pairs",
                 [result["after"][cause]]) for cause in CAUSES),
        Figure("duplicates.rows", section, "rows served, with identity resolved", "rows", [result["after_rows"]]),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = command("duplicates", __doc__)
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--anchor-date", type=dt.date.fromisoformat, default=dt.date(2026, 11, 25))
    args = parser.parse_args(argv)
    run = Run("duplicates", args.results, argv)
    run.save(figures_of(measure(args.records, args.seed, args.anchor_date)), args.records)
    return 0
