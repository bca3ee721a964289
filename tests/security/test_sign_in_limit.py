"""The explorer's sign-in form is rate limited per client address with the API's
limiter (issue 16 item 8, C5): guesses through the form and through the API share
one budget, and one more is refused with 429 and Retry-After, the right key too (so
a refusal says nothing about the key).

The application is composed as `lineups serve` composes it (`make_server_app`)."""

from __future__ import annotations

import dataclasses
import re
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from cli.serve import make_server_app
from tests.api.conftest import LiveServer, assert_error

LIMIT = 5


@pytest.fixture
def backend() -> str:
    return "sqlite"


@pytest.fixture
def served(fresh_tiny, sessions, store_settings):
    executor = ThreadPoolExecutor(4)
    composed = []

    def make(base_url: str):
        composed.append(make_server_app(dataclasses.replace(store_settings, base_url=base_url, rate_limit=LIMIT), sessions, executor))
        composed[0].explorer.build()  # started on the server's loop below
        return composed[0].app

    server = LiveServer(make)
    server.call(composed[0].explorer.mount, timeout=10)
    yield server
    server.stop()
    executor.shutdown(wait=True)


def sign_in(base_url: str, key: str) -> requests.Response:
    client = requests.Session()
    form = client.get(f"{base_url}/explorer/login", timeout=10)
    xsrf = re.search(r'name="_xsrf" value="([^"]+)"', form.text).group(1)
    return client.post(f"{base_url}/explorer/login", data={"_xsrf": xsrf, "api_key": key}, allow_redirects=False, timeout=10)


def test_sign_ins_are_limited_per_address_with_the_apis_budget(served, fresh_tiny):
    wrong = "lk_" + "0" * 32
    assert [sign_in(served.base_url, wrong).status_code for _ in range(LIMIT - 1)] == [401] * (LIMIT - 1)
    # The API's guesses from the same address count against the same budget.
    assert_error(requests.get(f"{served.base_url}/v1/sources", headers={"X-API-Key": wrong}, timeout=10), 401, "UNAUTHORIZED")
    for key in (wrong, fresh_tiny["key"]):  # the right key gets no other answer
        refused = sign_in(served.base_url, key)
        assert refused.status_code == 429, refused.text
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
        assert "Too many sign-in attempts" in refused.text
    assert_error(requests.get(f"{served.base_url}/v1/sources", headers={"X-API-Key": wrong}, timeout=10), 429, "RATE_LIMITED")
