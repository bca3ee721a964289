"""`python -m explorer`: the public base URL its share links begin with is found as
every `lineups` command finds it (issue 18.6)."""

from __future__ import annotations

from explorer.__main__ import parse_args, public_base_url
from store.database import config
from store.database.db import transaction


def test_the_stored_base_url_is_the_explorers_too(sessions, monkeypatch):
    monkeypatch.delenv("LINEUPS_BASE_URL", raising=False)
    args = parse_args(["--port", "5010"])
    assert public_base_url(args, sessions) == "http://127.0.0.1:5010"
    with transaction(sessions) as session:
        config.put(session, config.BASE_URL, "https://lineups.example.com/")
    assert public_base_url(args, sessions) == "https://lineups.example.com"
    monkeypatch.setenv("LINEUPS_BASE_URL", "https://env.example.com")
    assert public_base_url(args, sessions) == "https://env.example.com"
    assert public_base_url(parse_args(["--base-url", "https://flag.example.com"]), sessions) == "https://flag.example.com"
