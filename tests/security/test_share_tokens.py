"""Share-link tokens cannot be forged without the secret (C8; issue 9).

A token is `sl_payload.signature`, both base64url without padding (itsdangerous; a
compressed payload starts with a dot). Every single-bit change of the bytes it
carries, every character changed to one that changes those bytes, cuts, additions,
a token signed under another salt (a cursor's, or made up) or with another secret:
each is 401 UNAUTHORIZED, and the real token still works afterwards.

Why bytes and not characters: the last character of a base64 group may have unused
low bits, so some character changes decode to the same bytes, which is the same
token spelled differently and not a forgery. The sweep flips decoded bits and
re-encodes, so each variant really differs.
"""

from __future__ import annotations

from itsdangerous import URLSafeSerializer
from itsdangerous.encoding import base64_decode, base64_encode

from api.cursors import SALT as CURSOR_SALT
from store.access import links
from store.database.db import transaction
from store.database.schema import Buyer
from tests.api.conftest import assert_error

ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def make_token(api, buyer_id: str, **params) -> tuple[str, str]:
    with transaction(api.sessions) as session:
        link, token = links.create_link(
            session, session.get(Buyer, buyer_id), {k: [v] for k, v in params.items()}, api.settings.signing_secrets()
        )
        return link.id, token


def split(token: str) -> tuple[str, bytes, bytes]:
    """(prefix `sl_` and compression flag ".", payload bytes, signature bytes)."""
    payload, signature = token.removeprefix(links.TOKEN_PREFIX).rsplit(".", 1)
    flag = links.TOKEN_PREFIX + ("." if payload.startswith(".") else "")
    return flag, base64_decode(payload[len(flag) - len(links.TOKEN_PREFIX):]), base64_decode(signature)


def join(flag: str, payload: bytes, signature: bytes) -> str:
    return f"{flag}{base64_encode(payload).decode()}.{base64_encode(signature).decode()}"


def bit_flips(token: str):
    """Every token that differs from `token` in exactly one bit of its bytes."""
    flag, payload, signature = split(token)
    for part in ("payload", "signature"):
        data = payload if part == "payload" else signature
        for index in range(len(data)):
            for bit in range(8):
                changed = bytearray(data)
                changed[index] ^= 1 << bit
                yield (join(flag, bytes(changed), signature) if part == "payload"
                       else join(flag, payload, bytes(changed)))


def char_changes(token: str):
    """At every position, the token with one character changed so that the bytes it
    decodes to change (the dot is changed too)."""
    decoded = split(token)
    for index, char in enumerate(token):
        for other in ALPHABET + ".":
            if other == char:
                continue
            variant = token[:index] + other + token[index + 1:]
            try:
                if split(variant) == decoded:
                    continue  # unused low bits: the same bytes, not another token
            except Exception:
                pass  # no longer decodes at all: a good variant
            yield variant
            break


def test_every_flipped_bit_of_a_token_gives_401(fresh_tiny_api, fresh_tiny):
    api = fresh_tiny_api
    _, token = make_token(api, fresh_tiny["buyer_id"], port="BRSSZ", commodity="Soybeans")
    variants = set(bit_flips(token))
    flag, payload, signature = split(token)
    assert len(variants) == 8 * (len(payload) + len(signature))
    for variant in variants:
        assert variant != token
        assert_error(api.get(f"/v1/share/{variant}", key=None), 401, "UNAUTHORIZED")
    assert api.get(f"/v1/share/{token}", key=None).status_code == 200


def test_every_changed_character_of_a_token_gives_401(fresh_tiny_api, fresh_tiny):
    api = fresh_tiny_api
    _, token = make_token(api, fresh_tiny["buyer_id"], port="BRSSZ", commodity="Soybeans")
    variants = list(char_changes(token))
    assert len(variants) == len(token)
    for variant in variants:
        assert_error(api.get(f"/v1/share/{variant}", key=None), 401, "UNAUTHORIZED")
    cuts = [token[:-1], token[:-10], token.rsplit(".", 1)[0], token.rsplit(".", 1)[0] + ".", token + "A", "." + token]
    for variant in cuts:
        assert_error(api.get(f"/v1/share/{variant}", key=None), 401, "UNAUTHORIZED")


def test_tokens_signed_under_another_salt_or_secret_give_401(fresh_tiny_api, fresh_tiny):
    api = fresh_tiny_api
    link_id, token = make_token(api, fresh_tiny["buyer_id"])
    payload = {"l": link_id, "q": {}}
    secrets = list(reversed(api.settings.signing_secrets()))
    forged = [
        URLSafeSerializer(secrets, salt=CURSOR_SALT).dumps(payload),  # the cursors' namespace
        URLSafeSerializer(secrets, salt="lineups.share-link.v2").dumps(payload),
        URLSafeSerializer(secrets).dumps(payload),  # itsdangerous' default salt
        URLSafeSerializer("another secret", salt=links.SALT).dumps(payload),
        URLSafeSerializer(secrets[-1] + " ", salt=links.SALT).dumps(payload),
        URLSafeSerializer("", salt=links.SALT).dumps(payload),
    ]
    for bad in forged:
        assert_error(api.get(f"/v1/share/{bad}", key=None), 401, "UNAUTHORIZED")
    # And the other way round: a link token is no cursor.
    assert_error(api.get("/v1/lineups", params={"cursor": token}), 400, "VALIDATION_ERROR", "cursor")
    assert api.get(f"/v1/share/{token}", key=None).status_code == 200
