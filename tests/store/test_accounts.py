"""Buyers, API keys and subscriptions (C5, C7, C11), on SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import re

import pytest
from sqlalchemy import select, text

from store.access import accounts

from store.intake import feeds
from store.errors import Forbidden, NotFound, Unauthorized, ValidationError
from store.database.schema import ApiKey


@pytest.fixture
def buyer(session):
    return accounts.add_buyer(session, "Acme Trading")


def test_c5_keys_are_lk_and_32_lowercase_hex(session, buyer):
    keys = {accounts.create_key(session, buyer)[0] for _ in range(20)}
    assert len(keys) == 20
    assert all(re.fullmatch(r"lk_[0-9a-f]{32}", key) for key in keys)


def test_c5_keys_are_stored_only_as_sha256(session, buyer):
    key, row = accounts.create_key(session, buyer)
    assert row.key_hash == hashlib.sha256(key.encode()).hexdigest()
    assert row.prefix == key[:7]
    session.flush()
    # No column of any stored key holds the key's text or its secret part.
    dump = " ".join(str(v) for r in session.execute(text("SELECT * FROM api_keys")).all() for v in r)
    assert key not in dump and key[3:] not in dump and key[7:] not in dump


def test_c5_authenticate_returns_the_buyer_and_touches_the_key(session, buyer):
    key, row = accounts.create_key(session, buyer)
    assert row.last_used_at is None
    assert accounts.authenticate(session, key).id == buyer.id
    assert row.last_used_at is not None


@pytest.mark.parametrize(
    "key",
    [None, "", "lk_", "LK_" + "a" * 32, "lk_" + "A" * 32, "lk_" + "a" * 31, "lk_" + "g" * 32, "lk_" + "a" * 32 + " "],
)
def test_c5_missing_or_malformed_key_is_unauthorized(session, buyer, key):
    accounts.create_key(session, buyer)
    with pytest.raises(Unauthorized) as caught:
        accounts.authenticate(session, key)
    assert caught.value.status == 401


def test_c5_unknown_key_is_unauthorized(session, buyer):
    accounts.create_key(session, buyer)
    with pytest.raises(Unauthorized):
        accounts.authenticate(session, "lk_" + "0" * 32)


def test_c5_revoked_key_is_unauthorized_and_other_keys_still_work(session, buyer):
    revoked, row = accounts.create_key(session, buyer)
    other, _ = accounts.create_key(session, buyer)
    accounts.revoke_key(session, row)
    assert row.revoked_at is not None
    with pytest.raises(Unauthorized):
        accounts.authenticate(session, revoked)
    assert accounts.authenticate(session, other).id == buyer.id


def test_c5_suspended_buyer_is_forbidden_until_resumed(session, buyer):
    key, _ = accounts.create_key(session, buyer)
    accounts.set_buyer_status(session, buyer, "suspended")
    with pytest.raises(Forbidden) as caught:
        accounts.authenticate(session, key)
    assert caught.value.status == 403
    accounts.set_buyer_status(session, buyer, "active")
    assert accounts.authenticate(session, key).id == buyer.id


def test_buyer_status_must_be_known(session, buyer):
    with pytest.raises(ValidationError):
        accounts.set_buyer_status(session, buyer, "deleted")


def test_buyer_names_are_unique_and_not_blank(session, buyer):
    with pytest.raises(ValidationError):
        accounts.add_buyer(session, "  Acme   Trading ")
    with pytest.raises(ValidationError):
        accounts.add_buyer(session, "   ")


def test_find_buyer_by_id_or_name(session, buyer):
    assert accounts.find_buyer(session, buyer.id) is buyer
    assert accounts.find_buyer(session, "Acme Trading") is buyer
    with pytest.raises(NotFound):
        accounts.find_buyer(session, "Nobody")


def test_find_key_by_text_id_or_prefix(session, buyer):
    key, row = accounts.create_key(session, buyer)
    assert accounts.find_key(session, key).id == row.id
    assert accounts.find_key(session, row.id).id == row.id
    assert accounts.find_key(session, row.prefix).id == row.id
    with pytest.raises(NotFound):
        accounts.find_key(session, "lk_" + "f" * 32)
    with pytest.raises(NotFound):
        accounts.find_key(session, "lk_zz")


def test_find_key_refuses_an_ambiguous_prefix(session, buyer):
    _, first = accounts.create_key(session, buyer)
    _, second = accounts.create_key(session, buyer)
    second.prefix = first.prefix
    session.flush()
    with pytest.raises(NotFound):
        accounts.find_key(session, first.prefix)


@pytest.fixture
def three_feeds(session):
    return [
        feeds.add_feed(session, name, ["BRSSZ"])
        for name in ("Zulu Feed", "Alpha Feed", "Mike Feed")
    ]


def test_c7_active_and_trial_entitle_ordered_by_name(session, buyer, three_feeds):
    zulu, alpha, mike = three_feeds
    accounts.set_subscription(session, buyer, zulu, "active")
    accounts.set_subscription(session, buyer, alpha, "TRIAL")
    accounts.set_subscription(session, buyer, mike, "cancelled")
    got = [(e.feed.name, e.status) for e in accounts.entitlements(session, buyer.id)]
    assert got == [("Alpha Feed", "trial"), ("Zulu Feed", "active")]


def test_cancelling_a_subscription_ends_the_entitlement(session, buyer, three_feeds):
    zulu = three_feeds[0]
    first = accounts.set_subscription(session, buyer, zulu, "active")
    changed = first.changed_at
    assert [e.feed.id for e in accounts.entitlements(session, buyer.id)] == [zulu.id]
    again = accounts.set_subscription(session, buyer, zulu, "active")
    assert again.changed_at == changed  # no change, no new time
    accounts.set_subscription(session, buyer, zulu, "cancelled")
    assert accounts.entitlements(session, buyer.id) == []
    accounts.set_subscription(session, buyer, zulu, "trial")
    assert [e.status for e in accounts.entitlements(session, buyer.id)] == ["trial"]


def test_subscriptions_are_per_buyer(session, buyer, three_feeds):
    other = accounts.add_buyer(session, "Other Co")
    accounts.set_subscription(session, other, three_feeds[0], "active")
    assert accounts.entitlements(session, buyer.id) == []


def test_subscription_status_must_be_known(session, buyer, three_feeds):
    with pytest.raises(ValidationError):
        accounts.set_subscription(session, buyer, three_feeds[0], "paused")


def test_keys_survive_a_commit(sessions):
    with sessions() as session, session.begin():
        buyer = accounts.add_buyer(session, "Committed Buyer")
        key, _ = accounts.create_key(session, buyer)
    with sessions() as session:
        assert accounts.authenticate(session, key, touch=False).name == "Committed Buyer"
        assert session.scalar(select(ApiKey.prefix)) == key[:7]


