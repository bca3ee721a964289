"""Share-link tokens that survive copy and paste (issue 18.5, C8): they begin with
`sl_`, use only URL- and filename-safe characters, and tokens made before the prefix
still open their links."""

from __future__ import annotations

import re

import pytest

from store.access import accounts, links
from store.errors import Unauthorized

SECRETS = ("link-secret",)


@pytest.fixture
def buyer(session):
    return accounts.add_buyer(session, "Acme Trading")


@pytest.mark.parametrize("query", [{}, {"port": ["NLRTM"]}, {"commodity": ["coal,soybeans,iron ore"], "latest": ["true"]}])
def test_tokens_start_with_a_letter_and_are_url_and_filename_safe(session, buyer, query):
    link, token = links.create_link(session, buyer, query, SECRETS)
    assert re.fullmatch(r"sl_[A-Za-z0-9_.-]+", token), token
    assert links.open_link(session, token, SECRETS)[0].id == link.id


def test_tokens_made_before_the_prefix_keep_working(session, buyer):
    link, token = links.create_link(session, buyer, {"port": ["NLRTM"]}, SECRETS)
    old = links.signer(SECRETS).dumps({"l": link.id, "q": link.filters})
    assert token == links.TOKEN_PREFIX + old
    assert links.open_link(session, old, SECRETS)[0].id == link.id
    with pytest.raises(Unauthorized):
        links.open_link(session, "sl_" + token, SECRETS)


def test_a_label_is_unique_among_one_buyers_links_only(session, buyer):
    """Another buyer's labels are neither refused nor named to this buyer (the explorer
    passes the buyer's own label here, C11)."""
    from store.errors import ValidationError

    other = accounts.add_buyer(session, "Beta Grains")
    links.create_link(session, other, {"port": ["BRSSZ"]}, SECRETS, "Santos weekly")
    mine, _ = links.create_link(session, buyer, {"port": ["BRSSZ"]}, SECRETS, "santos  WEEKLY")
    assert mine.label == "santos WEEKLY"
    with pytest.raises(ValidationError) as refused:
        links.create_link(session, buyer, {"port": ["NLRTM"]}, SECRETS, "Santos weekly")
    assert "santos WEEKLY" in str(refused.value.details) and "Santos weekly'" not in str(refused.value.details)
