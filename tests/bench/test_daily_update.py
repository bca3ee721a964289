"""The benchmark's daily update (`bench/daily.py`, a step of the mixed workload, issue 15): its figure is the median
of several updates, each in a fresh process and each a different change of the store,
so that one slow or fast update, or the same change asked again, cannot make it."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import func, select

from bench import daily, stores
from store.database.db import make_sessionmaker, transaction
from store.database.schema import Feed, Record, RecordRevision


@pytest.mark.slow
def test_the_daily_update_figure_is_the_median_of_different_changes(tmp_path):
    store = stores.build_store(tmp_path, 2_000)
    stores.add_buyers(store)
    feed_id = store.feed_ids[0]
    engine = store.engine()
    sessions = make_sessionmaker(engine)
    with transaction(sessions) as session:
        version = session.get(Feed, feed_id).data_version
        records = session.scalar(select(func.count()).select_from(Record).where(Record.feed_id == feed_id))

    seen, command = daily.fresh_daily_update(store, changes=40, runs=2)

    assert seen.id == "mixed.daily" and len(seen.values) == 2 and all(v > 0 for v in seen.values)
    assert command.id == "mixed.daily.command" and len(command.values) == 2
    assert seen.note.startswith("2 updates; the median one's: view upkeep")
    assert re.search(r"read from the disk: [\d,]+ MiB", seen.note)  # what a paged-out store costs
    with transaction(sessions) as session:
        assert session.get(Feed, feed_id).data_version == version + 2
        now = session.scalar(select(func.count()).select_from(Record).where(Record.feed_id == feed_id))
        revised = session.scalar(
            select(func.count(func.distinct(RecordRevision.record_id)))
            .join(Record, Record.id == RecordRevision.record_id)
            .where(Record.feed_id == feed_id)
        )
    engine.dispose()
    assert now == records + 2 * 20  # each update's new calls, new records
    # Two different changes: the second update revised records the first did not
    # (one batch applied twice would leave the same 20 records revised twice).
    assert revised > 20
