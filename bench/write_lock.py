"""Requests while a writer holds SQLite's write lock (issue 16 item 1): the figures.

`lineups serve` over a demo store; another connection takes the write lock
(`BEGIN IMMEDIATE`, as a long ingest does) and holds it `--seconds` (default 35,
past SQLite's 30 s busy timeout). Meanwhile, every `--interval` seconds, a key used
for the first time asks GET /v1/sources, a share link is fetched, and /healthz is
asked. Reported: each kind's statuses and latency percentiles under the lock and
without it, and how long after the lock is released the notes of use (the link's
use count) are in the store. The test (tests/reliability/test_write_lock.py)
asserts only behaviour: 200 within seconds, never 500.

    python -m bench write-lock
"""

from __future__ import annotations

import collections
import json
import sqlite3
import tempfile
import time
from pathlib import Path

import requests

from bench.figures import Figure, Run, command
from bench.load import percentiles
from bench.processes import serve
from bench.stores import build_demo
from store.access import accounts, links
from store.database.db import make_engine, make_sessionmaker, transaction
from store.database.schema import ShareLink


def probe_round(base_url: str, key: str, share_url: str) -> list[tuple[str, int, float]]:
    """(kind, status, ms) of one fresh-key request, one share-link fetch, one /healthz."""
    out = []
    for kind, url, headers in (
        ("fresh key /v1/sources", f"{base_url}/v1/sources", {"X-API-Key": key}),
        ("share link", share_url, {}),
        ("/healthz", f"{base_url}/healthz", {}),
    ):
        began = time.monotonic()
        try:
            status = requests.get(url, headers=headers, timeout=60).status_code
        except requests.RequestException:
            status = 0
        out.append((kind, status, (time.monotonic() - began) * 1000))
    return out


def summary(rows: list[tuple[str, int, float]]) -> dict:
    by_kind: dict[str, list] = collections.defaultdict(list)
    for kind, status, ms in rows:
        by_kind[kind].append((status, ms))
    return {
        kind: {"statuses": dict(collections.Counter(s for s, _ in seen)), "ms": percentiles(sorted(ms for _, ms in seen))}
        for kind, seen in sorted(by_kind.items())
    }


def probe_under_lock(base_url: str, db_url: str, keys: list[str], share_url: str, seconds: float,
                     interval: float) -> tuple[list, list, float, float]:
    """Probe rounds without the lock (ten), then every `interval` s while another
    connection holds SQLite's write lock for `seconds`: (free, locked, held, released)."""
    free = [row for key in keys[:10] for row in probe_round(base_url, key, share_url)]
    writer = sqlite3.connect(db_url.removeprefix("sqlite:///"), timeout=1)
    writer.execute("BEGIN IMMEDIATE")
    held, locked = time.monotonic(), []
    for key in keys[10:]:
        if time.monotonic() - held >= seconds:
            break
        locked += probe_round(base_url, key, share_url)
        time.sleep(interval)
    writer.rollback()
    released = time.monotonic()
    writer.close()
    return free, locked, held, released


def main(argv: list[str] | None = None) -> int:
    parser = command("write-lock", __doc__)
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--seconds", type=float, default=35.0)
    parser.add_argument("--interval", type=float, default=0.5)
    args = parser.parse_args(argv)
    run = Run("write-lock", args.results, argv)
    with tempfile.TemporaryDirectory(prefix="lineups-write-lock-") as tmp:
        env, _ = build_demo(Path(tmp), args.records)
        engine = make_engine(env["LINEUPS_DB"])
        sessions = make_sessionmaker(engine)
        with serve(Path(tmp), "serve", env) as server:
            with transaction(sessions) as session:
                buyer = accounts.find_buyer(session, "Demo Buyer")
                link, token = links.create_link(session, buyer, {"port": ["BRSSZ"]}, (env["LINEUPS_SECRET"],))
                link_id, share_url = link.id, links.url_for(server.base_url, token)
                keys = [accounts.create_key(session, buyer)[0] for _ in range(int(args.seconds / args.interval) + 20)]
            free, locked, held, released = probe_under_lock(server.base_url, env["LINEUPS_DB"], keys, share_url,
                                                            args.seconds, args.interval)
            shares = sum(kind == "share link" for kind, _, _ in free + locked)
            written_after = None
            while time.monotonic() - released < 60:
                with sessions() as session:
                    if session.get(ShareLink, link_id).use_count == shares:
                        written_after = round(time.monotonic() - released, 2)
                        break
                time.sleep(0.1)
        engine.dispose()
    report = {"date": run.measured, "records": args.records, "lock_held_s": round(released - held, 1),
              "without_lock": summary(free), "under_lock": summary(locked), "uses_written_s_after_release": written_after}
    print(json.dumps(report, indent=1))
    section = f"SQLite's write lock held {report['lock_held_s']:.0f} s"
    ids = {"fresh key /v1/sources": "fresh_key", "share link": "share_link", "/healthz": "healthz"}
    figures = [Figure(f"write_lock.p99.{ids[kind]}", section, f"{kind}: p99 under the lock", "ms", [seen["ms"]["p99"]])
               for kind, seen in report["under_lock"].items() if seen["ms"]["p99"] is not None]
    figures += [Figure("write_lock.non_200", section, "answers other than 200 under the lock", "",
                       [sum(n for kind in report["under_lock"].values() for s, n in kind["statuses"].items() if s != 200)])]
    if written_after is not None:
        figures.append(Figure("write_lock.notes", section, "notes of use written after the release", "s", [written_after]))
    run.save(figures, args.records)
    return 0 if all(row[1] == 200 for row in locked) and written_after is not None else 1
