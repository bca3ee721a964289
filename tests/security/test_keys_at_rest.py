"""Keys and tokens at rest (C5, C8; issue 9): a dump of the whole store, after keys
and links were created and used, holds no API key and no share-link token, only
their hashes and ids."""

from __future__ import annotations

import hashlib
from pathlib import Path

from store.access import accounts, links
from store.database.db import transaction
from store.database.schema import Buyer
from store.settings import sqlite_path
from tests.security.store_dump import dump_store


def windows(secret: str, width: int = 12) -> set[str]:
    """Every piece of `secret` `width` characters long: a dump may hold none of them."""
    return {secret[i:i + width] for i in range(len(secret) - width + 1)}


def test_a_dump_of_the_store_holds_no_key_and_no_token(fresh_tiny_api, fresh_tiny):
    api = fresh_tiny_api
    secrets = api.settings.signing_secrets()
    with transaction(api.sessions) as session:
        buyer = session.get(Buyer, fresh_tiny["buyer_id"])
        made = [accounts.create_key(session, buyer)[0] for _ in range(3)]
        revoked_key, revoked_row = accounts.create_key(session, buyer)
        accounts.revoke_key(session, revoked_row)
        tokens = [links.create_link(session, buyer, query, secrets)[1] for query in ({}, {"port": ["BRSSZ"]})]
    keys = [fresh_tiny["key"], fresh_tiny["revoked_key"], fresh_tiny["suspended_key"], revoked_key, *made]
    for key in keys:  # used: last_used_at is written, nothing else about the key
        api.get("/v1/sources", key=key)
    for token in tokens:
        assert api.get(f"/v1/share/{token}", key=None).status_code == 200
    assert api.deps.usage.flush()  # uses are written off the request path (issue 16 item 1)

    dump = dump_store(api.settings)
    for key in keys:
        assert hashlib.sha256(key.encode()).hexdigest() in dump  # the dump does see the keys' rows
        assert not [piece for piece in windows(key) if piece in dump], "an API key is stored in clear"
    for token in tokens:
        payload, signature = token.rsplit(".", 1)
        assert token not in dump and signature not in dump, "a share-link token is stored"
    for secret in secrets:
        assert secret not in dump, "the signing secret is stored"


def test_the_sqlite_files_hold_no_key_in_any_page(fresh_tiny_api, fresh_tiny):
    """Beyond the dump: the raw bytes of the database file and its write-ahead log
    (freed pages included) never held a key."""
    path = sqlite_path(fresh_tiny_api.settings.db_url)
    if path is None:
        return  # PostgreSQL: the dump above is the check
    fresh_tiny_api.get("/v1/sources")
    raw = b"".join(p.read_bytes() for p in Path(path).parent.glob(Path(path).name + "*") if not p.name.endswith(".secret"))
    for key in (fresh_tiny["key"], fresh_tiny["revoked_key"], fresh_tiny["suspended_key"]):
        assert key[3:].encode() not in raw
