"""Rate limits (contract C5): a rolling window per key, errors included, headers on
every response, 429 with Retry-After, and per-address limits for requests without a
valid key."""

from __future__ import annotations

import pytest

from api.ratelimit import Hit, MemoryLimiter
from tests.api.conftest import assert_error


class FakeClock:
    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


# ---------------------------------------------------------------- the limiter alone
def test_window_admits_limit_then_refuses_until_the_oldest_leaves():
    clock = FakeClock()
    limiter = MemoryLimiter(3, 60, clock=clock)
    assert limiter.hit("k") == Hit(True, 2, 0)
    clock.now += 10
    assert limiter.hit("k") == Hit(True, 1, 0)
    clock.now += 10
    assert limiter.hit("k") == Hit(True, 0, 0)
    clock.now += 0.5
    # The first request (t=1000) leaves the window at t=1060: 39.5 s from now → 40.
    assert limiter.hit("k") == Hit(False, 0, 40)
    clock.now = 1059.9
    assert limiter.hit("k").allowed is False
    clock.now = 1060.0
    assert limiter.hit("k") == Hit(True, 0, 0)
    # Keys are counted apart.
    assert limiter.hit("other") == Hit(True, 2, 0)


def test_retry_after_is_whole_seconds_between_1_and_the_window():
    clock = FakeClock()
    limiter = MemoryLimiter(1, 60, clock=clock)
    limiter.hit("k")
    assert limiter.hit("k").retry_after == 60
    clock.now += 59.99
    assert limiter.hit("k").retry_after == 1


def test_refused_requests_do_not_extend_the_wait():
    clock = FakeClock()
    limiter = MemoryLimiter(2, 60, clock=clock)
    limiter.hit("k"), limiter.hit("k")
    for _ in range(50):
        clock.now += 1
        limiter.hit("k")
    clock.now = 1060
    assert limiter.hit("k").allowed


def test_limiter_rejects_nonsense_settings():
    with pytest.raises(ValueError):
        MemoryLimiter(0, 60)


# ---------------------------------------------------------------- over HTTP
@pytest.fixture
def limited_api(make_tiny_api, tiny):
    """A server over the hand-made store that admits 5 requests a minute."""
    return make_tiny_api(tiny["key"], limiter=MemoryLimiter(5, 60))


def test_headers_count_down_and_the_sixth_request_gets_429(limited_api):
    remaining = []
    for _ in range(5):
        response = limited_api.get("/v1/sources")
        assert response.status_code == 200
        assert response.headers["X-RateLimit-Limit"] == "5"
        remaining.append(int(response.headers["X-RateLimit-Remaining"]))
    assert remaining == [4, 3, 2, 1, 0]
    response = limited_api.get("/v1/sources")
    assert_error(response, 429, "RATE_LIMITED")
    assert response.headers["X-RateLimit-Limit"] == "5"
    assert response.headers["X-RateLimit-Remaining"] == "0"
    assert 1 <= int(response.headers["Retry-After"]) <= 60


def test_error_responses_count_and_carry_the_headers(limited_api, tiny):
    statuses = [
        limited_api.get("/v1/lineups", params={"limit": "0"}).status_code,  # 400
        limited_api.get("/v1/schema/" + tiny["d"]).status_code,  # 403
        limited_api.get("/v1/nothing").status_code,  # 404
        limited_api.request("POST", "/v1/lineups").status_code,  # 405
    ]
    assert statuses == [400, 403, 404, 405]
    response = limited_api.get("/v1/sources")
    assert response.status_code == 200 and response.headers["X-RateLimit-Remaining"] == "0"
    assert_error(limited_api.get("/v1/lineups", params={"limit": "0"}), 429, "RATE_LIMITED")


def test_each_key_has_its_own_window(limited_api, tiny):
    from store.access import accounts
    from store.database.db import transaction

    with transaction(limited_api.sessions) as session:
        second, _ = accounts.create_key(session, accounts.find_buyer(session, tiny["buyer_id"]))
    for _ in range(5):
        limited_api.get("/v1/sources")
    assert limited_api.get("/v1/sources").status_code == 429
    response = limited_api.get("/v1/sources", key=second)
    assert response.status_code == 200 and response.headers["X-RateLimit-Remaining"] == "4"


def test_a_suspended_buyers_key_is_counted_as_a_key(limited_api, tiny):
    response = limited_api.get("/v1/sources", key=tiny["suspended_key"])
    assert_error(response, 403, "FORBIDDEN")
    assert response.headers["X-RateLimit-Remaining"] == "4"


def test_bad_keys_are_limited_per_address(limited_api, tiny):
    """Guessing keys from one address stops after the limit, and the address's
    window is not the valid key's."""
    guesses = [f"lk_{i:032x}" for i in range(5)]
    for guess in guesses:
        assert_error(limited_api.get("/v1/sources", key=guess), 401, "UNAUTHORIZED")
    response = limited_api.get("/v1/sources", key="lk_" + "f" * 32)
    assert_error(response, 429, "RATE_LIMITED")
    assert 1 <= int(response.headers["Retry-After"]) <= 60
    # Missing and malformed keys share the address's window.
    assert_error(limited_api.get("/v1/sources", key=None), 429, "RATE_LIMITED")
    assert_error(limited_api.get("/v1/sources", key="nonsense"), 429, "RATE_LIMITED")
    # The real key still works: it is counted on its own.
    assert limited_api.get("/v1/sources").status_code == 200


def test_healthz_is_not_counted(limited_api):
    for _ in range(8):
        assert limited_api.get("/healthz", key=None).status_code == 200
    assert limited_api.get("/v1/sources").headers["X-RateLimit-Remaining"] == "4"
