"""The operator's workload of issue 47, measured as an operator meets it: with the
product's command line only, each step a `lineups` process timed from its start to
its exit.

1. a store of `--records` records in 20 feeds (the bench's demo-like data: each call
   reported by about five feeds), every feed added and ingested with `lineups feed
   add` and `lineups ingest`;
2. 7 buyers subscribed to 6-20 feeds each, one `lineups subscription set` at a time
   (each returns before the view is built, issue 47), then `lineups views build` for
   each buyer, as a server's builder would do in the background;
3. the store's size on disk, and the kept views as `lineups db status` lists them;
   beside, `command_floor_s`: what `lineups feed list` takes, the cost of a command
   that does next to nothing (Python and the service's imports), in every figure;
4. a daily update of 1,000 records of one feed (`lineups ingest`, half revisions, half
   new calls), and a re-send of one feed (`--resend` records, at most the feed's own:
   every record's ETA, ETB, ETD and status revised).

Writes its figures as one JSON object (`--out`, else stdout), beside the issue's
targets. Runs on a SQLite file in a temporary folder, or on `--db URL` (an empty
store: a PostgreSQL schema with `LINEUPS_DB_SCHEMA`).

    python -m bench operator --records 100000 --out operator.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from store.intake import demo  # noqa: E402  (the checkout's, whatever is installed)

LINEUPS = [sys.executable, "-c", "from cli.main import main; main()"]
FEEDS = 20
#: Share of the calls at its ports that each feed reports: 20 feeds x 0.25 = 5 a call.
SHARE = 0.25
ANCHOR = dt.date(2026, 11, 23)
SEED = 7
#: Feeds each buyer subscribes to (issue 47: 7 buyers of 6-20 feeds).
BUYER_FEEDS = (6, 8, 10, 12, 14, 17, 20)
#: Issue 47's targets (seconds unless said).
TARGETS = {
    "subscription_set_s": 2.0,
    "store_bytes": 4 * 2**30,
    "daily_update_s": 5.0,
    "resend_records_per_s": 2_000,
    "ingest_records_per_s": 50_000,
}


class Operator:
    """`lineups` commands on one store, each timed from its start to its exit."""

    def __init__(self, db_url: str):
        self.env = {**os.environ, "LINEUPS_DB": db_url, "LINEUPS_SECRET": os.environ.get("LINEUPS_SECRET", "bench")}

    def run(self, *args: str) -> tuple[dict, float]:
        """The command's --json output and its wall time in seconds."""
        started = time.perf_counter()
        done = subprocess.run([*LINEUPS, *args, "--json"], cwd=ROOT, env=self.env, capture_output=True, text=True)
        took = time.perf_counter() - started
        if done.returncode != 0:
            raise RuntimeError(f"lineups {' '.join(args)} failed: {done.stdout}{done.stderr}")
        return json.loads(done.stdout), took


#: Every feed covers the demo's ports.
PORTS = tuple(sorted({p for f in demo.DEMO_FEEDS for p in f.ports}))


def feed_files(folder: Path, records: int) -> list[tuple[str, Path, pd.DataFrame]]:
    """The 20 feeds' files (CSV): (name, path, rows)."""
    ports = PORTS
    calls = demo.build_calls(SEED, int(records / (FEEDS * SHARE) * 1.1) + 10, ANCHOR)
    out = []
    for i in range(FEEDS):
        spec = demo.DemoFeed(f"Operator Feed {i + 1:02d}", ports, "daily", "agency", (4.0, 4.0, 4.0), "active")
        rows = demo.feed_rows(calls, i, SEED, spec, SHARE)
        rows = rows.iloc[: records // FEEDS + (i < records % FEEDS)].reset_index(drop=True)
        path = folder / f"feed-{i + 1:02d}.csv"
        rows.to_csv(path, index=False)
        out.append((spec.name, path, rows))
    return out


def _shifted(rows: pd.DataFrame, hours: np.ndarray) -> pd.DataFrame:
    out = rows.copy()
    for column in ("eta", "etb", "etd"):
        times = pd.to_datetime(out[column].replace("", None), utc=True, errors="coerce")
        moved = (times + pd.to_timedelta(hours, unit="h")).dt.strftime("%Y-%m-%dT%H:%M:%SZ")
        out[column] = moved.where(times.notna(), out[column])
    return out


def daily_file(folder: Path, rows: pd.DataFrame, count: int = 1_000) -> Path:
    """A daily update of one feed: half its records revised (dates a few hours on, a
    new quantity), half new calls of the same vessels (new refs)."""
    rng = np.random.default_rng(11)
    picked = rows.iloc[rng.choice(len(rows), size=min(count, len(rows)), replace=False)].reset_index(drop=True)
    picked = _shifted(picked, rng.integers(1, 48, len(picked)))
    half = len(picked) // 2
    picked.loc[: half - 1, "quantity"] = [str(q) for q in rng.integers(10, 90, half) * 1000]
    picked.loc[half:, "ref"] = [f"DAILY-{i}" for i in range(len(picked) - half)]
    path = folder / "daily.csv"
    picked.to_csv(path, index=False)
    return path


def resend_file(folder: Path, rows: pd.DataFrame, count: int) -> tuple[Path, int]:
    """A re-send of `count` of the feed's records (at most all), every one's dates and
    status revised."""
    rng = np.random.default_rng(12)
    picked = _shifted(rows.iloc[:count].reset_index(drop=True), rng.integers(1, 72, min(count, len(rows))))
    statuses = sorted(set(rows["vessel_status"]) - {""}) or ["expected"]
    picked["vessel_status"] = [statuses[(statuses.index(s) + 1) % len(statuses)] if s in statuses else statuses[0]
                               for s in picked["vessel_status"]]
    path = folder / "resend.csv"
    picked.to_csv(path, index=False)
    return path, len(picked)


def store_bytes(db_url: str) -> int | None:
    """The SQLite file with its write-ahead log; None for another database."""
    if not db_url.startswith("sqlite:///"):
        return None
    path = Path(db_url.removeprefix("sqlite:///"))
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def workload(db_url: str, folder: Path, records: int, resend: int) -> dict:
    """Every step of the module docstring; the figures."""
    op = Operator(db_url)
    op.run("db", "upgrade")
    floor = [op.run("feed", "list")[1] for _ in range(3)]  # a command that does next to nothing
    files = feed_files(folder, records)
    feed_ids, ingest_s = [], 0.0
    for name, path, _ in files:
        feed_ids.append(op.run("feed", "add", name, *(a for p in PORTS for a in ("--port", p)))[0]["id"])
        ingest_s += op.run("ingest", feed_ids[-1], str(path))[1]
    stored = sum(len(rows) for _, _, rows in files)

    set_s, build_s, buyers = [], [], []
    for b, count in enumerate(BUYER_FEEDS):
        buyers.append(op.run("buyer", "add", f"Operator Buyer {b + 1}")[0]["id"])
        for feed_id in feed_ids[:count]:
            body, took = op.run("subscription", "set", buyers[-1], feed_id, "active")
            set_s.append(took)
        done, took = op.run("views", "build", buyers[-1])
        assert done["switched"] == [buyers[-1]], done
        build_s.append(took)
    status = op.run("db", "status")[0]
    views = status.get("views", [])

    daily_path = daily_file(folder, files[0][2])
    daily = op.run("ingest", feed_ids[0], str(daily_path))
    resend_path, resent = resend_file(folder, files[1][2], resend)
    again = op.run("ingest", feed_ids[1], str(resend_path))
    return {
        "records": stored,
        "feeds": FEEDS,
        "buyers": len(BUYER_FEEDS),
        "db": "sqlite" if db_url.startswith("sqlite") else "postgresql",
        "command_floor_s": _spread(floor),
        "ingest_s": round(ingest_s, 2),
        "ingest_records_per_s": round(stored / ingest_s),
        "subscription_set_s": _spread(set_s),
        "subscription_sets": len(set_s),
        "views_build_s": _spread(build_s),
        "views_build_total_s": round(sum(build_s), 2),
        "store_bytes": store_bytes(db_url),
        "views": len(views),
        "view_rows": sum(v["rows"] for v in views),
        "views_bytes": sum(v["bytes"] or 0 for v in views),
        "daily_update_s": round(daily[1], 2),
        "daily_update": daily[0],
        "resend_records": resent,
        "resend_s": round(again[1], 2),
        "resend_records_per_s": round(resent / again[1]),
        "resend": again[0],
        "targets": TARGETS,
    }


def _spread(values: list[float]) -> dict:
    ordered = sorted(values)
    return {"median": round(float(np.median(ordered)), 3), "min": round(ordered[0], 3), "max": round(ordered[-1], 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench operator", description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--resend", type=int, default=50_000, help="records of the re-send (at most one feed's)")
    parser.add_argument("--db", help="an empty store's URL (default: a SQLite file in a temporary folder)")
    parser.add_argument("--out", type=Path, help="write the figures here (default: stdout)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="operator-workload-") as folder:
        db_url = args.db or f"sqlite:///{Path(folder) / 'store.db'}"
        figures = {"measured_at": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                   **workload(db_url, Path(folder), args.records, args.resend)}
    text = json.dumps(figures, indent=2)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
