"""Authentication (seed section 5, contract C5): 401 against 403, on every endpoint."""

from __future__ import annotations

import pytest

from tests.api.conftest import assert_error

KEYED_PATHS = ("/v1/lineups", "/v1/sources", "/v1/lineups/some-id/provenance")


@pytest.mark.parametrize(
    "key",
    [
        None,  # missing
        "",  # empty
        "lk_123",  # malformed: too short
        "LK_0123456789ABCDEF0123456789ABCDEF",  # malformed: upper case
        "xx_0123456789abcdef0123456789abcdef",  # malformed: prefix
        "lk_0123456789abcdef0123456789abcdef",  # well-formed, unknown
    ],
    ids=["missing", "empty", "short", "upper", "prefix", "unknown"],
)
def test_missing_malformed_or_unknown_key_is_401(tiny_api, tiny, key):
    for path in (*KEYED_PATHS, f"/v1/schema/{tiny['a']}"):
        assert_error(tiny_api.get(path, key=key), 401, "UNAUTHORIZED")


def test_revoked_key_is_401(tiny_api, tiny):
    for path in (*KEYED_PATHS, f"/v1/schema/{tiny['a']}"):
        assert_error(tiny_api.get(path, key=tiny["revoked_key"]), 401, "UNAUTHORIZED")


def test_suspended_buyer_is_403(tiny_api, tiny):
    for path in (*KEYED_PATHS, f"/v1/schema/{tiny['a']}"):
        assert_error(tiny_api.get(path, key=tiny["suspended_key"]), 403, "FORBIDDEN")


def test_auth_comes_before_parameter_checks(tiny_api):
    assert_error(tiny_api.get("/v1/lineups", params={"limit": "0"}, key=None), 401, "UNAUTHORIZED")
    assert_error(tiny_api.get("/v1/schema/not-a-uuid", key=None), 401, "UNAUTHORIZED")


def test_revocation_and_suspension_take_effect_at_once(fresh_tiny_api, fresh_tiny, sessions):
    from store.access import accounts
    from store.database.db import transaction

    tiny_api, tiny = fresh_tiny_api, fresh_tiny

    assert tiny_api.get("/v1/sources").status_code == 200
    with transaction(sessions) as session:
        accounts.set_buyer_status(session, accounts.find_buyer(session, tiny["buyer_id"]), "suspended")
    assert_error(tiny_api.get("/v1/sources"), 403, "FORBIDDEN")
    with transaction(sessions) as session:
        accounts.set_buyer_status(session, accounts.find_buyer(session, tiny["buyer_id"]), "active")
        accounts.revoke_key(session, accounts.find_key(session, tiny["key"]))
    assert_error(tiny_api.get("/v1/sources"), 401, "UNAUTHORIZED")


def test_openapi_and_healthz_need_no_key(tiny_api):
    assert tiny_api.get("/v1/openapi.json", key=None).status_code == 200
    assert tiny_api.get("/healthz", key=None).status_code == 200
    # A bad key does not spoil a public endpoint either.
    assert tiny_api.get("/v1/openapi.json", key="lk_nope").status_code == 200


def test_key_use_is_recorded(tiny_api, tiny):
    from store.access import accounts

    assert tiny_api.get("/v1/sources").status_code == 200
    assert tiny_api.deps.usage.flush()  # written off the request path (issue 16 item 1)
    with tiny_api.sessions() as session:
        assert accounts.find_key(session, tiny["key"]).last_used_at is not None
