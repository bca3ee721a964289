"""Rolling in a new signing secret (issue 9, store/settings.py): `LINEUPS_SECRET` is
a comma list, newest first; the newest signs, all verify. Through HTTP, on servers
over one store that differ only in their secrets:

    OLD          the service before the roll-over
    NEW,OLD      during it: what OLD signed keeps working, new things are signed NEW
    NEW          after it: what only OLD signed stops (links 401, cursors 400)
"""

from __future__ import annotations

import dataclasses

import pytest

from store.access import links
from store.database.db import transaction
from store.database.schema import Buyer
from store.settings import Settings
from tests.api.conftest import Servers, assert_error


@pytest.fixture
def servers(sessions, store_settings, fresh_tiny):
    """`servers[LINEUPS_SECRET value]`: an API over the test's store with those secrets."""
    started = []

    def server(secret_env: str):
        settings = dataclasses.replace(store_settings, secrets=Settings.load(env={"LINEUPS_SECRET": secret_env}).secrets)
        group = Servers(sessions, settings)
        started.append(group)
        return group(fresh_tiny["key"])

    yield {env: server(env) for env in ("old-secret-with-at-least-32-characters", " new-secret-with-at-least-32-characters , old-secret-with-at-least-32-characters ", "new-secret-with-at-least-32-characters")}
    for group in started:
        group.stop()


def make_link(api, buyer_id: str) -> str:
    with transaction(api.sessions) as session:
        _, token = links.create_link(session, session.get(Buyer, buyer_id), {}, api.settings.signing_secrets())
    return f"/v1/share/{token}"


def test_the_secret_list_is_newest_first_and_trimmed(servers):
    assert servers[" new-secret-with-at-least-32-characters , old-secret-with-at-least-32-characters "].settings.secrets == ("new-secret-with-at-least-32-characters", "old-secret-with-at-least-32-characters")


def test_links_and_cursors_survive_the_roll_over_and_stop_after_it(servers, fresh_tiny):
    old, rolling, new = servers["old-secret-with-at-least-32-characters"], servers[" new-secret-with-at-least-32-characters , old-secret-with-at-least-32-characters "], servers["new-secret-with-at-least-32-characters"]
    old_link = make_link(old, fresh_tiny["buyer_id"])
    first = old.lineups(limit=1)
    old_cursor = first["next_cursor"]
    assert old_cursor
    second_page = old.get("/v1/lineups", params={"limit": 1, "cursor": old_cursor})
    sheet = old.get(old_link, key=None)
    assert second_page.status_code == 200 and sheet.status_code == 200

    # During the roll-over: what OLD signed still works, and gives the same answers.
    assert rolling.get(old_link, key=None).content == sheet.content
    during = rolling.get("/v1/lineups", params={"limit": 1, "cursor": old_cursor})
    assert during.status_code == 200 and during.json()["data"] == second_page.json()["data"]
    # ... and what is signed now is signed with NEW: the old-only service refuses it.
    new_cursor = during.json()["next_cursor"]
    new_link = make_link(rolling, fresh_tiny["buyer_id"])
    assert new_cursor and new.get("/v1/lineups", params={"limit": 1, "cursor": new_cursor}).status_code == 200
    assert new.get(new_link, key=None).status_code == 200
    assert_error(old.get("/v1/lineups", params={"limit": 1, "cursor": new_cursor}), 400, "VALIDATION_ERROR", "cursor")
    assert_error(old.get(new_link, key=None), 401, "UNAUTHORIZED")

    # After it (OLD removed): what only OLD signed stops.
    assert_error(new.get(old_link, key=None), 401, "UNAUTHORIZED")
    assert_error(new.get("/v1/lineups", params={"limit": 1, "cursor": old_cursor}), 400, "VALIDATION_ERROR", "cursor")
    # The link itself lives on: re-signed with NEW (as `lineups link list --show-tokens` does), it works.
    with transaction(new.sessions) as session:
        (row,) = [r for r in links.list_links(session, fresh_tiny["buyer_id"]) if links.token_for(r, ("old-secret-with-at-least-32-characters",)) in old_link]
        reissued = f"/v1/share/{links.token_for(row, new.settings.signing_secrets())}"
    assert new.get(reissued, key=None).content == sheet.content
