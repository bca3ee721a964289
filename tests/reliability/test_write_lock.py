"""No request waits on a writer (issue 16 item 1): while another connection holds
SQLite's write lock for longer than its 30 s busy timeout (a long ingest), keys used
for the first time, share links and /healthz are answered 200 within seconds, never
500; the notes of their use (`last_used_at`, use counts) are written once the lock
is free (`store.access.usage.UsageWriter`).

(The latency under such a writer is a figure for bench/, not an assertion here.)
"""

from __future__ import annotations

import sqlite3
import time

from store.access import accounts, links
from store.database.db import transaction
from store.database.schema import ApiKey, Buyer, ShareLink
from store.settings import sqlite_path
from tests.api.conftest import fresh_tiny, make_api  # noqa: F401 - fixtures

#: How long the other connection holds the write lock: past SQLite's busy timeout.
LOCK_S = 35.0
#: Generous: an answer within this is "not waiting for the lock" on a busy machine.
ANSWER_S = 5.0


def test_reads_are_answered_while_a_writer_holds_the_lock(make_api, fresh_tiny, sessions, store_settings):
    with transaction(sessions) as session:
        buyer = session.get(Buyer, fresh_tiny["buyer_id"])
        keys = [accounts.create_key(session, buyer)[0] for _ in range(12)]
        link, token = links.create_link(session, buyer, {}, store_settings.signing_secrets())
        link_id = link.id
    api = make_api(fresh_tiny["key"])
    assert api.get("/healthz", key=None).status_code == 200  # the pool has its connections
    # The link's merged view is built before the lock is taken (building one is a
    # write of the read path's own, issue 15); its uses are what this test is about.
    assert api.get(f"/v1/share/{token}", key=None).status_code == 200

    writer = sqlite3.connect(sqlite_path(store_settings.db_url), timeout=1)
    writer.execute("BEGIN IMMEDIATE")  # holds the write lock, as an ingest does
    held = time.monotonic()
    answers, shares = [], 0
    try:
        for key in keys:  # a fresh key each round, over the whole time the lock is held
            for path, with_key in (("/v1/sources", key), (f"/v1/share/{token}", None), ("/healthz", None)):
                began = time.monotonic()
                response = api.get(path, key=with_key)
                answers.append((path, response.status_code, time.monotonic() - began, time.monotonic() - held))
                shares += path.startswith("/v1/share/")
            if time.monotonic() - held > LOCK_S:
                break
            time.sleep(max(0.0, held + LOCK_S * (keys.index(key) + 1) / len(keys) - time.monotonic()))
        held_for = time.monotonic() - held
    finally:
        writer.rollback()
        writer.close()

    assert held_for > 31, "the lock was not held past SQLite's busy timeout"
    slow_or_failed = [a for a in answers if a[1] != 200 or a[2] > ANSWER_S]
    assert not slow_or_failed, slow_or_failed
    assert answers[-1][3] > 31  # still answered after the 30 s a write would have waited

    assert api.deps.usage.flush(timeout=60)  # written once the lock is free
    with sessions() as session:
        assert session.get(ShareLink, link_id).use_count == shares + 1
        used = [accounts.find_key(session, key).last_used_at for key in keys[: len(answers) // 3]]
    assert all(used), used
