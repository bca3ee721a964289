"""Readers of a view that another process is building (issue 15: other buyers are
served undisturbed). A reader whose view is held by a build elsewhere waits for it on
the event loop, not in one of the server's threads: however many such readers pile
up, other buyers' pages and share links are answered meanwhile, and the waiting
readers get their pages once the view is built. On SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
import time
from concurrent.futures import ThreadPoolExecutor

import requests

from store.access import accounts, links
from store.database.db import transaction
from store.database.schema import Buyer, Feed
from store.intake import demo
from store.views import builds, upkeep
from tests.paused_build import paused_build

#: The server's threads for blocking work; more readers of the held view than that.
THREADS = 2
READERS = 3 * THREADS


def test_readers_of_a_view_being_built_elsewhere_hold_no_thread_other_buyers_need(make_api, sessions, store_settings):
    with transaction(sessions) as session:
        payload = demo.load_demo(session, 300, 7, dt.date(2024, 3, 1))
        feed_ids = sorted(feed.id for feed in accounts.entitled_feeds(session, payload["buyer_id"]))
        other = accounts.add_buyer(session, "Other buyer")
        accounts.set_subscription(session, other, session.get(Feed, feed_ids[0]), "active")
        other_key, _ = accounts.create_key(session, other)
        other_id = other.id
    builds.ensure_buyer(sessions, other_id)  # the other buyer's views are ready
    api = make_api(payload["api_key"], executor=ThreadPoolExecutor(THREADS, thread_name_prefix="test-api"))
    with transaction(sessions) as session:
        _, token = links.create_link(session, session.get(Buyer, other_id), {}, api.settings.signing_secrets())
    url = api.base_url + "/v1/lineups"

    def page(key: str) -> requests.Response:
        return requests.get(url, params={"limit": 5}, headers={"X-API-Key": key}, timeout=60)

    with paused_build(store_settings, upkeep.ViewKey.of("all", feed_ids)) as builder, \
            ThreadPoolExecutor(READERS) as clients:
        waiting = [clients.submit(page, payload["api_key"]) for _ in range(READERS)]
        time.sleep(1)  # they reach the server: were they waiting in its threads, they would take them all
        assert not any(w.done() for w in waiting)
        others = page(other_key)
        assert others.status_code == 200 and len(others.json()["data"]) == 5
        share = requests.get(f"{api.base_url}/v1/share/{token}", timeout=60)
        assert share.status_code == 200 and share.text.count("\n") > 5
        assert not any(w.done() for w in waiting)  # still waiting for the build
        builder.kill()  # the next reader builds the view (its hold died with the process)
        builder.wait(10)
        answers = [w.result(timeout=60) for w in waiting]
    assert [a.status_code for a in answers] == [200] * READERS
    assert len({a.text for a in answers}) == 1 and len(answers[0].json()["data"]) == 5
