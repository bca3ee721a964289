"""Likely duplicates among the demo buyer's rows, by cause, before and after issue 19.

Loads the demo data set into a temporary SQLite store, merges the demo buyer's
records (`merge=all`) twice: as C2 stood before issue 19 (vessel = IMO else name,
commodity = taxonomy leaf: `store.merging.resolve.resolve` replaced by the identity)
and with its rules 1 and 2; counts the pairs of rows that are likely one call
(`store.merging.duplicates`, the same definition as `lineups quality duplicates` and
the explorer's flags) by cause; writes docs/benchmarks-duplicates.md (and a PNG bar
chart beside it).

    PYTHONPATH=. .venv/bin/python bench/duplicates.py [--records 5000] [--anchor-date 2026-11-25]
"""

from __future__ import annotations

import argparse
import datetime as dt
import tempfile
import time
from pathlib import Path
from unittest import mock

import pandas as pd

from store.access import accounts
from store.database.db import create_schema, make_engine, make_sessionmaker, transaction
from store.intake.demo import load_demo
from store.merging import merge as engine
from store.merging.duplicates import CAUSES, counts
from store.merging.records import load_records
from store.merging.resolve import Resolution

ROOT = Path(__file__).resolve().parents[1]


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
        started = time.perf_counter()
        before = engine.merge(frame, "all")
        out["before_seconds"] = time.perf_counter() - started
    started = time.perf_counter()
    after = engine.merge(frame, "all")
    out["after_seconds"] = time.perf_counter() - started
    out["before"], out["after"] = counts(before), counts(after)
    out["before_rows"], out["after_rows"] = len(before), len(after)
    return out


def write(result: dict, folder: Path) -> None:
    lines = [
        "# Likely duplicates on the demo data (issue 19)",
        "",
        f"The demo buyer's rows (`merge=all`) of the demo data set ({result['demo_records']:,} records, of "
        f"which the buyer's feeds hold {result['records']:,}; seed {result['seed']}, around {result['anchor']}), before and after the merge resolved vessel identity "
        "and commodity specificity. A pair of rows is *likely one call* when it has the same vessel, port and "
        "commodity subgroup and dates (the earliest of ETA, ETB, ETD) at most 3 days apart (`store/merging/duplicates.py`, the definition "
        "`lineups quality duplicates` and the explorer's flags use). Made by `bench/duplicates.py`.",
        "",
        "| cause | before | after |",
        "|---|---:|---:|",
        *(f"| {c} | {result['before'][c]} | {result['after'][c]} |" for c in CAUSES),
        f"| **all pairs** | **{sum(result['before'].values())}** | **{sum(result['after'].values())}** |",
        f"| rows served | {result['before_rows']:,} | {result['after_rows']:,} |",
        "",
        "What remains is what the rules leave alone on purpose: calls whose feeds name different "
        "counterparties (C2.4 keeps them apart), and name-only records whose name two vessels (IMO "
        "numbers) of the buyer's feeds carry (the demo fleet reuses a few names), which rule 1 does not "
        "guess between. \"Other\" would be pairs the merge has no reason to join (two different specific "
        "commodities, say).",
        "",
        "![Likely duplicates by cause](benchmarks-duplicates.png)",
        "",
    ]
    (folder / "benchmarks-duplicates.md").write_text("\n".join(lines))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # the figure is optional
        return
    figure, axes = plt.subplots(figsize=(7, 3.2))
    positions = range(len(CAUSES))
    axes.barh([p + 0.2 for p in positions], [result["before"][c] for c in CAUSES], 0.4, label="before (C2)")
    axes.barh([p - 0.2 for p in positions], [result["after"][c] for c in CAUSES], 0.4, label="after (issue 19)")
    axes.set_yticks(list(positions), CAUSES)
    axes.invert_yaxis()
    axes.set_xlabel("pairs of rows that are likely one call")
    axes.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(folder / "benchmarks-duplicates.png", dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--anchor-date", type=dt.date.fromisoformat, default=dt.date(2026, 11, 25))
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    args = parser.parse_args()
    result = measure(args.records, args.seed, args.anchor_date)
    write(result, args.out)
    print({k: v for k, v in result.items()})


if __name__ == "__main__":
    main()
