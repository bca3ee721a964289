"""Share links (contract C8): signed, individually revocable CSV links.

A link belongs to a buyer and freezes a /v1/lineups query (every parameter but
`cursor` and `limit`). Its token is signed with itsdangerous under a salt of its own
and carries the link id and the filters, so the URL names what it shows; the
signature makes it unforgeable without the secret. The store keeps the link's
filters, creation, last use, use count and revocation; the token itself is never
stored (it can be re-derived from the id and filters with the secret).

Every request through a link re-checks (C8): the link exists and is not revoked
(else 401), the buyer is not suspended (else 403), and at least one of the link's
feeds is entitled now (else 403).
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any, Mapping
from urllib.parse import parse_qs, urlencode

from itsdangerous import BadSignature, URLSafeSerializer
from sqlalchemy import Connection, bindparam, select, update
from sqlalchemy.orm import Session

from store.access.accounts import active_buyer
from store.errors import Forbidden, NotFound, Unauthorized, ValidationError
from store.ids import canonical_uuid, is_uuid
from store.fields import format_time, stored_now
from store.names import check_free, find_named
from store.database.schema import Buyer, ShareLink
from store.query import PAGE_PARAMETERS, parse_query
from store.reference.taxonomy import default_taxonomy

SALT = "lineups.share-link.v1"
#: Every token begins with it (issue 18.5): a letter first, so that a token is never
#: a hidden file name (itsdangerous' compressed form begins with "."), and a token is
#: recognisable where it is pasted. Tokens made before it (2026-11) still open.
TOKEN_PREFIX = "sl_"
#: The characters of a token (a regular-expression class): URL- and filename-safe.
TOKEN_CHARACTERS = "A-Za-z0-9_.-"
#: Parameters of /v1/lineups that a link does not freeze.
NOT_FROZEN = PAGE_PARAMETERS


def signer(secrets: tuple[str, ...]) -> URLSafeSerializer:
    """The link signer. `secrets` are newest first: the newest signs, all verify."""
    return URLSafeSerializer(list(reversed(secrets)), salt=SALT)


def frozen_params(args: Mapping[str, list[str]]) -> dict[str, str]:
    """The filters a link freezes, validated exactly as /v1/lineups validates them.

    Raises ValidationError (the API's answer for the same parameters), also for
    `cursor` or `limit`, which a link does not carry, and `format=json` (a link
    always serves CSV)."""
    for name in NOT_FROZEN:
        if name in args:
            raise ValidationError.parameter(name, "a share link serves the whole result; it takes no cursor or limit")
    query, _, _ = parse_query(args, default_taxonomy().parse_filter)
    if "format" in args and query.format != "csv":
        raise ValidationError.parameter("format", "a share link always serves CSV")
    params = query.to_params()
    params.pop("format", None)
    return dict(sorted(params.items()))


def parse_query_string(text: str) -> dict[str, list[str]]:
    """A URL query string (`port=NLRTM&commodity=coal`) as the API sees arguments."""
    return parse_qs(text.lstrip("?"), keep_blank_values=True, strict_parsing=False)


def create_link(
    session: Session, buyer: Buyer, args: Mapping[str, list[str]], secrets: tuple[str, ...], label: str | None = None
) -> tuple[ShareLink, str]:
    """A new link of `buyer` for the query `args`, with an optional `label` that names
    it (unique ignoring case among the buyer's links, C11: other buyers' labels are
    neither refused nor revealed); returns the link and its token. Raises
    ValidationError for refused filters or a label the buyer already gave a link."""
    params = frozen_params(args)
    label = " ".join(label.split()) if label else None
    if label:
        check_free(session, ShareLink.label, label, "share link", parameter="label", among=ShareLink.buyer_id == buyer.id)
    link = ShareLink(
        id=str(uuid.uuid4()), buyer_id=buyer.id, filters=params, created_at=stored_now(), use_count=0, label=label
    )
    session.add(link)
    session.flush()
    return link, token_for(link, secrets)


def token_for(link: ShareLink, secrets: tuple[str, ...]) -> str:
    """The link's token: `sl_`, then its id and filters, signed (URL-safe base64 and
    dots)."""
    return TOKEN_PREFIX + signer(secrets).dumps({"l": link.id, "q": link.filters})


def url_for(base_url: str, token: str) -> str:
    return f"{base_url.rstrip('/')}/v1/share/{token}"


def list_links(session: Session, buyer_id: str) -> list[ShareLink]:
    """The buyer's links, newest first, revoked ones included."""
    return list(
        session.scalars(
            select(ShareLink).where(ShareLink.buyer_id == buyer_id).order_by(ShareLink.created_at.desc(), ShareLink.id)
        )
    )


def find_link(session: Session, ident: str, buyer_id: str | None = None, labelled: bool = False) -> ShareLink:
    """The link with id `ident` of `buyer_id` (the explorer, the API); or, for the
    command line (`labelled`), the link with id or label `ident` ignoring case, among
    `buyer_id`'s links when given. Raises NotFound, and ValidationError when a label
    names links of several buyers (the operator then names the buyer)."""
    if not labelled:
        link_id = canonical_uuid(ident)
        link = session.get(ShareLink, link_id) if link_id else None
        if link is None or (buyer_id is not None and link.buyer_id != buyer_id):
            raise NotFound(f"No share link with id {ident!r}")
        return link
    among = ShareLink.buyer_id == buyer_id if buyer_id is not None else None
    return find_named(
        session, ShareLink, ShareLink.label, ident, "share link", among,
        ambiguous="labels are per buyer: give the link's id, or the buyer with --buyer",
    )


def revoke_link(session: Session, link: ShareLink) -> ShareLink:
    """Revoke at once: the next request through it gets 401."""
    if link.revoked_at is None:
        link.revoked_at = stored_now()
        session.flush()
    return link


def open_link(
    session: Session, token: str, secrets: tuple[str, ...], count_use: bool = True
) -> tuple[ShareLink, dict[str, list[str]]]:
    """Check a token and its link (C8) and, with `count_use`, count the use.

    Returns the link and its frozen query as API arguments. Raises Unauthorized for a
    bad signature, an unknown or revoked link, and Forbidden for a suspended buyer.
    Entitlement of the feeds is checked by the caller's query (403 when none is left)."""
    try:
        payload = signer(secrets).loads(token.removeprefix(TOKEN_PREFIX))
        link_id, params = payload["l"], payload["q"]
    except (BadSignature, KeyError, TypeError, ValueError, UnicodeError):
        raise Unauthorized("Invalid share link") from None
    link = session.get(ShareLink, link_id) if is_uuid(link_id) else None
    if link is None or link.revoked_at is not None or link.filters != params:
        raise Unauthorized("This share link does not exist or was revoked")
    suspended = "The account behind this share link is suspended"
    active_buyer(session, link.buyer_id, Forbidden(suspended), suspended)
    if count_use:
        session.execute(
            update(ShareLink)
            .where(ShareLink.id == link.id)
            .values(use_count=ShareLink.use_count + 1, last_used_at=stored_now())
        )
    return link, {name: [value] for name, value in params.items()}


def note_link_uses(connection: Connection, uses: Mapping[str, tuple[int, dt.datetime]]) -> None:
    """Add `(count, last use)` of `uses` (link id → naive UTC time) to the links'
    use counts and `last_used_at`, in one statement: the batches of
    `store.access.usage.UsageWriter` (C8: links are listed with last use and use count)."""
    if uses:
        connection.execute(
            update(ShareLink)
            .where(ShareLink.id == bindparam("b_id"))
            .values(use_count=ShareLink.use_count + bindparam("b_count"), last_used_at=bindparam("b_when")),
            [{"b_id": link_id, "b_count": count, "b_when": when} for link_id, (count, when) in uses.items()],
        )


def link_dict(link: ShareLink, url: str | None = None) -> dict[str, Any]:
    """A link as the command line and the explorer list it (no token unless `url`)."""
    out = {
        "id": link.id,
        "label": link.label,
        "buyer_id": link.buyer_id,
        "filters": link.filters,
        "query": urlencode(link.filters),
        "created_at": format_time(link.created_at),
        "last_used_at": format_time(link.last_used_at),
        "use_count": link.use_count,
        "revoked_at": format_time(link.revoked_at),
    }
    if url is not None:
        out["url"] = url
    return out
