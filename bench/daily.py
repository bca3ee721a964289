"""The daily update, a step of the mixed workload (issue 15: "a 1,000-record daily
update reaches every view within 2 s"): a change of one feed ingested as an operator's
`lineups ingest` runs, in a fresh process, timed from its start until another process
reads it, with the system calls and disk reads it made.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from sqlalchemy import select

from bench.figures import Figure, Target
from bench.stores import Dataset
from bench.stores import changes as dataset_changes
from store.database.db import make_sessionmaker, transaction
from store.database.schema import Feed
from store.intake import ingest


def fresh_daily_update(dataset: Dataset, changes: int = 1_000, runs: int = 1) -> list[Figure]:
    """`runs` daily updates (`daily_update`), each a different change in a fresh process,
    as an operator's `lineups ingest` runs (a process that built views before runs one
    faster); their median, as one update's time moves by a third from one to the next.
    A `concurrent.futures` worker: a `multiprocessing.Pool`'s are daemons, which may not
    start the reader `daily_update` watches with."""
    done: list[list[Figure]] = []
    for round_ in range(1, runs + 1):
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            done.append(pool.submit(daily_update, dataset, changes, round_).result(timeout=900))
    seen = [figures[0].values[0] for figures in done]
    middle = done[seen.index(statistics.median_low(seen))]  # the update the note tells of
    return [
        dataclasses.replace(figure, values=[f[i].values[0] for f in done],
                            note=f"{runs} updates; the median one's: {figure.note}" if runs > 1 and figure.note else figure.note)
        for i, figure in enumerate(middle)
    ]


def _clock() -> float:
    """Seconds of the machine's monotonic clock: one clock for every process."""
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def _watch(dataset: Dataset, feed_id: str, version: int, ready, seen) -> None:
    """A reader in a process of its own, as a server is: sets `ready`, then polls the
    feed's data version every 5 ms and sets `seen` (`_clock`) once it changed."""
    engine = dataset.engine()
    try:
        ready.set()
        while True:
            with engine.connect() as connection:
                now = connection.scalar(select(Feed.data_version).where(Feed.id == feed_id))
            if now != version:
                seen.value = _clock()
                return
            time.sleep(0.005)
    finally:
        engine.dispose()


def io_calls() -> tuple[int, int, int]:
    """This process's read and write system calls so far and the bytes its reads brought
    from the disk (/proc/self/io; zeros elsewhere): SQLite's pages, a call each, and the
    pages the kernel had paged out (docs/architecture.md)."""
    try:
        fields = dict(line.split(": ", 1) for line in Path("/proc/self/io").read_text().splitlines())
    except OSError:
        return 0, 0, 0
    return int(fields["syscr"]), int(fields["syscw"]), int(fields["read_bytes"])


def daily_update(dataset: Dataset, changes: int = 1_000, round_: int = 1) -> list[Figure]:
    """A daily update of `changes` records into one feed (half revisions, half new; made
    beforehand by `stores.changes`, `round_` a different change each), whose transaction
    brings every view of the feed up to date: timed from the ingest's start until another
    process (`_watch`: a thread would take the interpreter lock from the upkeep) reads
    the feed's new data version; and the command's own wait, until its commit returns
    (with SQLite's checkpoint, which runs after readers see the change)."""
    engine = dataset.engine()
    sessions = make_sessionmaker(engine)
    feed_id = dataset.feed_ids[0]
    with transaction(sessions) as session:
        batch = dataset_changes(session, feed_id, changes, round_)
        version = session.get(Feed, feed_id).data_version
    context = multiprocessing.get_context("spawn")
    ready, seen = context.Event(), context.Value("d", 0.0)
    reader = context.Process(target=_watch, args=(dataset, feed_id, version, ready, seen), daemon=True)
    reader.start()
    if not ready.wait(60):
        reader.kill()
        raise RuntimeError("the reader that watches for the daily update did not start")
    calls = io_calls()
    start = _clock()
    with transaction(sessions) as session:
        report = ingest.upsert(session, session.get(Feed, feed_id), batch)
        written = _clock()
    returned = _clock()
    reads, writes, disk = (after - before for after, before in zip(io_calls(), calls))
    reader.join(timeout=60)
    if reader.is_alive():
        reader.kill()
    engine.dispose()
    if not seen.value:
        raise RuntimeError("the daily update never became visible to another connection")
    return [
        Figure("mixed.daily", "Mixed workload",
               f"a {changes:,}-record update: from the ingest's start until every view shows it to a reader", "s",
               [seen.value - start], Target("<=", 2.0),
               note=f"view upkeep {report.views_seconds:.2f} s of it ({report.views}); records and views "
                    f"written {written - start:.2f} s, commit {returned - written:.2f} s; the process's read and "
                    f"write system calls (SQLite's pages, the commit's checkpoint too): {reads:,} and {writes:,}; "
                    f"read from the disk: {disk / 2**20:,.0f} MiB"),
        Figure("mixed.daily.command", "Mixed workload", "the ingest's own wait, until its commit returns (with the checkpoint)",
               "s", [returned - start]),
    ]
