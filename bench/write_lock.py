"""Requests while a writer holds SQLite's write lock (issue 16 item 1): the figures.

`lineups serve` over a demo store; another connection takes the write lock
(`BEGIN IMMEDIATE`, as a long ingest does) and holds it `--seconds` (default 35,
past SQLite's 30 s busy timeout). Meanwhile, every `--interval` seconds, a key used
for the first time asks GET /v1/sources, a share link is fetched, and /healthz is
asked. Reported: each kind's statuses and latency percentiles under the lock and
without it, and how long after the lock is released the notes of use (the link's
use count) are in the store. The test (tests/reliability/test_write_lock.py)
asserts only behaviour: 200 within seconds, never 500.

    python -m bench write-lock --out write-lock.json
"""

from __future__ import annotations

import argparse
import collections
import json
import sqlite3
import tempfile
import time
from pathlib import Path

import requests

from bench.figures import RESULTS, Figure, machine, now, save
from bench.load import percentiles
from bench.processes import Process, free_port, lineups_command
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench write-lock", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--seconds", type=float, default=35.0)
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--results", type=Path, default=RESULTS, help="where the result file goes")
    args = parser.parse_args(argv)
    measured, where = now(), machine()
    folder = Path(tempfile.mkdtemp(prefix="lineups-write-lock-"))
    db_url, secret = build_demo(folder, args.records)
    engine = make_engine(db_url)
    sessions = make_sessionmaker(engine)
    rounds = int(args.seconds / args.interval) + 20
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    with transaction(sessions) as session:
        buyer = accounts.find_buyer(session, "Demo Buyer")
        link, token = links.create_link(session, buyer, {"port": ["BRSSZ"]}, (secret,))
        link_id, share_url = link.id, links.url_for(base_url, token)
        keys = [accounts.create_key(session, buyer)[0] for _ in range(rounds)]
    env = {"LINEUPS_DB": db_url, "LINEUPS_SECRET": secret, "LINEUPS_BASE_URL": base_url}
    command = [*lineups_command(), "serve", "--port", str(port)]
    with Process(command, port, folder / "serve.log", env).start("/healthz"):
        free = [row for key in keys[:10] for row in probe_round(base_url, key, share_url)]
        writer = sqlite3.connect(db_url.removeprefix("sqlite:///"), timeout=1)
        writer.execute("BEGIN IMMEDIATE")
        held = time.monotonic()
        locked = []
        for key in keys[10:]:
            if time.monotonic() - held >= args.seconds:
                break
            locked += probe_round(base_url, key, share_url)
            time.sleep(args.interval)
        writer.rollback()
        released = time.monotonic()
        writer.close()
        shares = sum(kind == "share link" for kind, _, _ in free + locked)
        written_after = None
        while time.monotonic() - released < 60:
            with sessions() as session:
                if session.get(ShareLink, link_id).use_count == shares:
                    written_after = round(time.monotonic() - released, 2)
                    break
            time.sleep(0.1)
    engine.dispose()
    report = {
        "date": time.strftime("%Y-%m-%d"), "records": args.records, "lock_held_s": round(released - held, 1),
        "without_lock": summary(free), "under_lock": summary(locked),
        "uses_written_s_after_release": written_after,
    }
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    section = f"SQLite's write lock held {report['lock_held_s']:.0f} s"
    ids = {"fresh key /v1/sources": "fresh_key", "share link": "share_link", "/healthz": "healthz"}
    figures = [Figure(f"write_lock.p99.{ids[kind]}", section, f"{kind}: p99 under the lock", "ms", [seen["ms"]["p99"]])
               for kind, seen in report["under_lock"].items() if seen["ms"]["p99"] is not None]
    figures += [Figure("write_lock.non_200", section, "answers other than 200 under the lock", "",
                       [sum(n for kind in report["under_lock"].values() for s, n in kind["statuses"].items() if s != 200)])]
    if written_after is not None:
        figures.append(Figure("write_lock.notes", section, "notes of use written after the release", "s", [written_after]))
    save("write-lock", figures, measured=measured, where=where, store="sqlite", records=args.records, argv=argv,
         folder=args.results)
    failures = [row for row in locked if row[1] != 200]
    return 0 if not failures and written_after is not None else 1

