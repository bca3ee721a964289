"""Where the mixed workload's distinct pages spend their time, by the filters they use.

    .venv/bin/python bench/page_tail.py [--records 1000000] [--queries 800]

Builds the mixed workload's store (`dataset.build_store`, `mixed.add_buyers`: 20 feeds,
7 buyers, their views) in a temporary folder, then asks its distinct first pages
(`mixed.questions`) one after another in this process, as a server's worker does
(the key's admission, then `Lineups.page`), after 40 uncounted ones. It prints the
mean, median, p90 and p99, the share of the time the slowest tenth takes, each kind of
question (merge mode and filters) by its share of the time, and the slowest pages.

Why: the load step's pages/s (docs/benchmarks.md) is set by a tail of slow questions
(at 1,000,000 records, 2026-11-27: the slowest tenth took half the time), which a
figure over all questions does not name. No server and no client, so that what it
times is the store's work alone: SQLite's (or PostgreSQL's) and the read path's Python.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from dataset import build_store
from mixed import add_buyers, questions

from api.handlers import parse
from store.access import accounts
from store.database.db import make_engine, make_sessionmaker
from store.views.lineups import Lineups

WARM_UP = 40
KINDS = ("port", "country", "commodity", "from", "to", "latest")


def say(message: str) -> None:
    print(f"[page_tail {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def kind(params: dict) -> str:
    """A question's merge mode and the filters it uses, e.g. "by_source port commodity"."""
    return " ".join([params.get("merge", "all"), *(name for name in KINDS if name in params)])


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - a command
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=800)
    parser.add_argument("--slowest", type=int, default=10, help="slowest pages to list")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="lineups-page-tail-") as tmp:
        say(f"building a store of {args.records:,} records …")
        dataset = build_store(Path(tmp), args.records)
        say("adding the buyers and building their views …")
        buyers, views_s, kept = add_buyers(dataset)
        say(f"{kept['views']} views, {kept['rows']:,} kept rows, in {views_s:.0f} s")
        engine = make_engine(dataset.db_url)
        lineups = Lineups(make_sessionmaker(engine))

        def page(key: str, params: dict) -> None:
            query, limit, _ = parse({name: [value.encode()] for name, value in params.items()})
            with engine.connect() as connection:
                admission = accounts.admit(connection, key)
            lineups.page(admission.buyer_id, query, None, limit, admission.feeds)

        asks = questions(buyers, args.queries + WARM_UP)
        for _, key, params in asks[:WARM_UP]:
            page(key, params)
        timed: list[tuple[float, str, dict]] = []
        for number, (name, key, params) in enumerate(asks[WARM_UP:], 1):
            start = time.perf_counter()
            page(key, params)
            timed.append(((time.perf_counter() - start) * 1000, name, params))
            if number % 200 == 0:
                say(f"  {number:,} of {args.queries:,} pages")
        engine.dispose()
    report(timed, args.slowest)
    return 0


def report(timed: list[tuple[float, str, dict]], slowest: int) -> None:
    ms = np.sort([t for t, _, _ in timed])
    total = ms.sum()
    print(f"{len(ms)} distinct first pages, {len(ms) / total * 1000:.0f} pages/s in one thread: mean {ms.mean():.2f} ms, median "
          f"{np.median(ms):.2f}, p90 {np.percentile(ms, 90):.2f}, p99 {np.percentile(ms, 99):.2f}; "
          f"the slowest tenth {ms[int(len(ms) * 0.9):].sum() / total:.0%} of the time")
    kinds: dict[str, list[float]] = collections.defaultdict(list)
    for t, _, params in timed:
        kinds[kind(params)].append(t)
    print("\nshare  pages   mean ms    p90 ms    max ms  kind")
    for name, times in sorted(kinds.items(), key=lambda item: -sum(item[1])):
        print(f"{sum(times) / total:5.1%}  {len(times):5}  {np.mean(times):8.2f}  {np.percentile(times, 90):8.2f}"
              f"  {max(times):8.2f}  {name}")
    print("\nslowest pages:")
    for t, name, params in sorted(timed, key=lambda item: -item[0])[:slowest]:
        print(f"{t:8.1f} ms  {name}  {params}")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
