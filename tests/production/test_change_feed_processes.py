"""The change feed (issue 46) with several server processes: a follower whose calls
land on either worker of `lineups serve --processes 2` holds what `/v1/lineups` returns
after each sync, across ingests and a subscription change made with the command line
between its calls. On SQLite and PostgreSQL."""

from __future__ import annotations

import csv

import requests

from tests.production.conftest import lineups

FILTERS = ({}, {"latest": "true"}, {"merge": "by_source"}, {"port": "BRSSZ", "latest": "true"})


def fresh_get(server, key: str, path: str, params: dict) -> requests.Response:
    """A request on a connection of its own, so that calls spread over the workers."""
    return requests.get(server.base_url + path, params=params, headers={"X-API-Key": key, "Connection": "close"}, timeout=30)


def follow(server, key: str, state: dict, params: dict) -> set[str]:
    """Apply the change feed to `state` ({"rows", "cursor"}) until caught up; returns
    the request ids of the calls."""
    ids = set()
    for _ in range(500):
        asked = {**params, "limit": 2, **({"cursor": state["cursor"]} if state["cursor"] else {})}
        response = fresh_get(server, key, "/v1/lineups/changes", asked)
        ids.add(response.headers["X-Request-Id"])
        if response.status_code == 400 and response.json()["error"]["details"].get("reason") == "cursor_expired":
            state["rows"], state["cursor"] = {}, None
            continue
        assert response.status_code == 200, response.text
        body = response.json()
        for item in body["data"]:
            if item["op"] == "upsert":
                state["rows"][item["row"]["id"]] = item["row"]
            else:
                state["rows"].pop(item["id"], None)
        state["cursor"] = body["next_cursor"]
        if body["caught_up"]:
            return ids
    raise AssertionError("never caught up")


def download(server, key: str, params: dict) -> dict:
    rows, cursor = {}, None
    while True:
        body = fresh_get(server, key, "/v1/lineups", {**params, "limit": 500, **({"cursor": cursor} if cursor else {})}).json()
        rows.update((row["id"], row) for row in body["data"])
        cursor = body["next_cursor"]
        if cursor is None:
            return rows


def feed_file(path, rows: list[dict]) -> str:
    columns = list(dict.fromkeys(name for row in rows for name in row))
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, columns)
        writer.writeheader()
        writer.writerows(rows)
    return str(path)


def test_a_follower_served_by_two_workers_holds_what_lineups_returns(tiny_store, served, tmp_path):
    env, key = tiny_store["env"], tiny_store["key"]
    server = served(env, "--per-process-limits", processes=2)
    followers = [{"params": params, "rows": {}, "cursor": None} for params in FILTERS]
    request_ids: set[str] = set()

    def in_sync() -> None:
        for follower in followers:
            request_ids.update(follow(server, key, follower, follower["params"]))
            assert follower["rows"] == download(server, key, follower["params"]), follower["params"]

    in_sync()
    changes = [
        ("ingest", "Alpha Santos Lineup", [
            {"ref": "A1", "port_unlocode": "BRSSZ", "vessel_imo": "9321483", "vessel_name": "MV Ocean Star",
             "commodity": "soybeans", "eta": "2024-03-06T18:00:00Z", "quantity": "61000"},
            {"ref": "A7", "port_unlocode": "BRSSZ", "vessel_name": "Sea Breeze", "commodity": "wheat", "eta": "2024-03-12T00:00:00Z"},
        ]),
        ("ingest", "Alpha Santos Lineup", [
            {"ref": "A8", "port_unlocode": "BRSSZ", "vessel_name": "Sea Breeze", "commodity": "wheat", "eta": "2024-03-20T00:00:00Z"},
        ]),
        ("subscription", "Tiny Buyer", "Bravo Santos Reports", "cancelled"),
        ("ingest", "Alpha Santos Lineup", [
            {"ref": "A7", "port_unlocode": "BRSSZ", "vessel_name": "Sea Breeze", "commodity": "wheat", "eta": "2024-03-13T00:00:00Z"},
        ]),
    ]
    for number, change in enumerate(changes):
        if change[0] == "ingest":
            done = lineups(env, "ingest", change[1], feed_file(tmp_path / f"update-{number}.csv", change[2]), "--json")
        else:
            done = lineups(env, "subscription", "set", *change[1:], "--json")
        assert done.returncode == 0, done.stderr
        in_sync()
    workers = {server.worker_of(_Response(request_id)) for request_id in sorted(request_ids)[:40]}
    assert len(workers) == 2, workers  # both workers answered the feed


class _Response:
    """What `Served.worker_of` reads of a response: its request id."""

    def __init__(self, request_id: str):
        self.headers = {"X-Request-Id": request_id}
