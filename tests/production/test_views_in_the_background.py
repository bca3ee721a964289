"""Subscription changes built in the background by the servers (issue 47), with two
server processes over one store (SQLite and PostgreSQL): `lineups subscription set`
returns before the buyer's new view is built; every worker serves the buyer's
previous feeds until the view is ready and the buyer is switched to it, then the new
ones, and nothing between; a cancellation stops pages and share links at once (C8)."""

from __future__ import annotations

import json
import time

import requests

from store.views.upkeep import ViewKey
from tests.paused_build import paused_build
from tests.production.conftest import lineups

QUERY = {"limit": 500}


def page_ids(server, key: str) -> frozenset[str]:
    """The ids of the buyer's rows on one new connection (the kernel picks a worker)."""
    response = requests.get(server.base_url + "/v1/lineups", params=QUERY, headers={"X-API-Key": key}, timeout=60)
    assert response.status_code == 200, response.text
    return frozenset(row["id"] for row in response.json()["data"])


def run_json(env: dict, *args: str) -> dict:
    done = lineups(env, *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_subscription_change_takes_effect_when_its_view_is_built_never_a_mix(tiny_store, served, store_settings):
    env, key, buyer = tiny_store["env"], tiny_store["key"], tiny_store["buyer_id"]
    server = served(env, "--per-process-limits", processes=2)
    before = page_ids(server, key)
    new_key = ViewKey.of("all", [tiny_store["a"], tiny_store["b"], tiny_store["c"]])
    holding = store_settings.db_url.startswith("postgresql")  # SQLite: a build holds the one write lock
    if holding:  # the new view is being built by another process for as long as this block lasts
        with paused_build(store_settings, new_key) as builder:
            body = run_json(env, "subscription", "set", buyer, tiny_store["c"], "active")
            assert body["pending"] is True  # it returned before the view was built
            assert run_json(env, "buyer", "show", buyer)["view"] == "building"
            workers = set()
            for _ in range(200):  # every worker serves the previous feeds meanwhile
                response = requests.get(server.base_url + "/v1/lineups", params=QUERY, headers={"X-API-Key": key},
                                        timeout=60)
                assert frozenset(row["id"] for row in response.json()["data"]) == before
                workers.add(server.worker_of(response))
                if workers >= server.workers():
                    break
            assert workers >= server.workers()
            builder.kill()
    else:
        body = run_json(env, "subscription", "set", buyer, tiny_store["c"], "active")
        assert body["pending"] is True  # it returned before the view was built (no one had built it)
    seen, deadline = [], time.monotonic() + 60
    while time.monotonic() < deadline:  # the servers' builders build it and switch the buyer
        seen.append(page_ids(server, key))
        if run_json(env, "buyer", "show", buyer)["switched"] and len(seen) > 3 and seen[-1] == seen[-2] != before:
            break
    after = seen[-1]
    assert after != before and after > before  # feed C's call added to the buyer's rows
    assert set(seen) <= {before, after}  # the old feeds or the new ones, never a mix
    assert {page_ids(server, key) for _ in range(20)} == {after}  # every worker now

    link = run_json(env, "link", "create", buyer)
    share_url = server.base_url + "/v1/share/" + link["url"].rsplit("/v1/share/", 1)[1]
    assert requests.get(share_url, timeout=60).status_code == 200
    body = run_json(env, "subscription", "set", buyer, tiny_store["a"], tiny_store["b"], tiny_store["c"], "cancelled")
    assert body["pending"] is False
    answer = requests.get(server.base_url + "/v1/lineups", params=QUERY, headers={"X-API-Key": key}, timeout=60)
    assert answer.status_code == 200 and answer.json()["data"] == []  # at once: no feed left
    assert requests.get(share_url, timeout=60).status_code == 403  # C8: the link stops at once
