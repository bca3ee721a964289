"""A caught-up buyer's sync after a daily update, against a full download (issue 46:
"after a 1,000-record daily update, a caught-up buyer's sync transfers the rows that
changed, at most 3x their number, and takes <= 2 s"):

    python -m bench sync [--records N] [--changes C] [--runs R]

On a store of `--records` records (`bench/dataset.py`, SQLite; default 100,000) behind a
fresh `lineups serve`, the bench buyer's whole result (`merge=all`, no filter) is
synced once into a SQLite file through the client (`client.Client.sync`). Then, `--runs`
times: a daily update of `--changes` records of one feed (`dataset.changes`: half
revisions, half new calls), the buyer's sync timed from its first request until the
file is caught up, and a full download of the same result (`Client.lineups`) timed
beside it. The rows that changed are counted by comparing the downloads before and
after; the daily update's own time and the part of it that wrote the change feed's
record (`changes.note`) are given beside. One result file under `bench/results/`.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.figures import RESULTS, Figure, Target, machine, now, print_figures, save
from bench.stores import build_store
from bench.stores import changes as dataset_changes
from bench.stores import start_server

from client import Client
from store.database.db import transaction
from store.database.schema import Feed
from store.intake import ingest
from store.views import changes as view_changes


def changed_rows(before: dict, after: dict) -> int:
    """Rows new, gone or different between two downloads (by id)."""
    return sum(1 for row_id in before.keys() | after.keys() if before.get(row_id) != after.get(row_id))


def by_id(frame) -> dict:
    return {row["id"]: row for row in frame.astype(object).where(frame.notna(), None).to_dict("records")}


class NoteClock:
    """The time the ingest spends writing the change feed's record (`changes.note`,
    every view of the feed), measured around the function in this process."""

    def __init__(self):
        self.seconds, self.original = 0.0, view_changes.note
        view_changes.note = self

    def __call__(self, *args):
        started = time.perf_counter()
        self.original(*args)
        self.seconds += time.perf_counter() - started


def measure(records: int, changes: int, runs: int, folder: Path) -> dict:
    dataset = build_store(folder, records)
    server = start_server(dataset, folder, "sync-serve")
    with server:
        api = Client(server.base_url, dataset.api_key, progress=False)
        path = folder / "local.sqlite"
        started = time.perf_counter()
        first = api.sync(str(path))
        first_s = time.perf_counter() - started
        before = by_id(api.lineups())
        sessions = dataset.sessions()
        rounds = []
        clock = NoteClock()
        for round_ in range(1, runs + 1):
            with transaction(sessions) as session:
                frame = dataset_changes(session, dataset.feed_ids[0], changes, round_)
            clock.seconds, started = 0.0, time.perf_counter()
            with transaction(sessions) as session:
                ingest.upsert(session, session.get(Feed, dataset.feed_ids[0]), frame)
            update_s, record_s = time.perf_counter() - started, clock.seconds
            started = time.perf_counter()
            report = api.sync(str(path))
            sync_s = time.perf_counter() - started
            started = time.perf_counter()
            downloaded = api.lineups()
            download_s = time.perf_counter() - started
            after = by_id(downloaded)
            changed = changed_rows(before, after)
            rounds.append({
                "update_s": update_s, "record_s": record_s,
                "sync_s": sync_s, "download_s": download_s, "items": report.upserted + report.deleted,
                "pages": report.pages, "changed_rows": changed, "result_rows": len(after),
                "items_per_changed_row": (report.upserted + report.deleted) / max(changed, 1),
                "file_equals_download": report.rows == len(after),
            })
            before = after
    return dataset.records, first_s, first.rows, rounds


def figures_of(changes: int, first_s: float, first_rows: int, rounds: list[dict]) -> list[Figure]:
    section = "Staying in sync (issue 46)"
    changed = max(r["changed_rows"] for r in rounds)
    return [
        Figure("sync.caught_up_s", section, f"a caught-up sync after a {changes:,}-record daily update", "s",
               [r["sync_s"] for r in rounds], Target("<=", 2.0),
               reference=("a full download of the same result", min(r["download_s"] for r in rounds))),
        Figure("sync.items_per_changed_row", section, "items it transferred per row that changed", "x",
               [r["items_per_changed_row"] for r in rounds], Target("<=", 3.0),
               note=f"{changed:,} rows changed of {rounds[0]['result_rows']:,}"),
        Figure("sync.full_download_s", section, "a full download of the result (`Client.lineups`)", "s",
               [r["download_s"] for r in rounds]),
        Figure("sync.first_s", section, f"the first sync, {first_rows:,} rows", "s", [first_s]),
        Figure("sync.update_s", section, f"the {changes:,}-record daily update itself (every view)", "s",
               [r["update_s"] for r in rounds]),
        Figure("sync.record_s", section, "of which writing the change feed's record", "s", [r["record_s"] for r in rounds]),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench sync", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--changes", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--results", type=Path, default=RESULTS, help="where the result file goes")
    args = parser.parse_args(argv)
    measured, where = now(), machine()
    with tempfile.TemporaryDirectory(prefix="bench-sync-") as folder:
        records, first_s, first_rows, rounds = measure(args.records, args.changes, args.runs, Path(folder))
    assert all(r["file_equals_download"] for r in rounds), rounds
    figures = figures_of(args.changes, first_s, first_rows, rounds)
    print_figures(figures)
    save("sync", figures, measured=measured, where=where, store="sqlite", records=records, argv=argv, folder=args.results)
    return 0
