"""Download tickets: the explorer's "Download CSV (all rows)" as an HTTP download
(issue 49 item 5).

The explorer's download used to build the whole result in memory and send it over
the websocket (74.5 MB for 221,736 rows), with no ceiling and no slot. Now the
explorer answers the button with a redirect to the API's `/v1/download/{ticket}`,
which streams the CSV as share links do, through the same export slots and row
ceiling (`api.share.DownloadHandler`). A ticket is signed (itsdangerous, its own
salt) and short-lived (`TICKET_S`): it names the signed-in buyer, the key and the
sign-in of the explorer session, and the query's /v1/lineups parameters. Opening
one re-checks, as every explorer action does, that the key is not revoked, the
buyer not suspended and the sign-in not ended by a logout.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

from itsdangerous import BadSignature, URLSafeTimedSerializer
from sqlalchemy.orm import Session

from store.access import accounts, signins
from store.errors import Unauthorized

SALT = "lineups.explorer-download.v1"
#: Every ticket begins with it (as share-link tokens begin with `sl_`): logs mask it.
TICKET_PREFIX = "dl_"
#: Seconds a ticket opens a download: it only has to last the browser's redirect.
TICKET_S = 60
EXPIRED = "This download link has expired or is not valid: download again from the explorer"


@dataclasses.dataclass(frozen=True)
class Ticket:
    """What a download ticket carries: who asked, and the query's parameters."""

    buyer_id: str
    key_id: str
    sign_in_id: str
    args: dict[str, list[str]]


def signer(secrets: tuple[str, ...]) -> URLSafeTimedSerializer:
    """The ticket signer. `secrets` are newest first: the newest signs, all verify."""
    return URLSafeTimedSerializer(list(reversed(secrets)), salt=SALT)


def ticket_for(secrets: tuple[str, ...], buyer_id: str, key_id: str, sign_in_id: str,
               args: Mapping[str, list[str]]) -> str:
    """A ticket for the download of the /v1/lineups result of `args` by this sign-in."""
    payload = {"b": buyer_id, "k": key_id, "s": sign_in_id, "q": {name: list(v) for name, v in args.items()}}
    return TICKET_PREFIX + signer(secrets).dumps(payload)


def open_ticket(session: Session, ticket: str, secrets: tuple[str, ...], max_age: float = TICKET_S) -> Ticket:
    """The ticket's content, once its signature, its age, the key, the buyer and the
    sign-in are checked. Raises Unauthorized for a ticket that is altered, made up or
    expired, a revoked key or an ended sign-in, and Forbidden for a suspended buyer."""
    try:
        payload = signer(secrets).loads(ticket.removeprefix(TICKET_PREFIX), max_age=max_age)
    except BadSignature:  # SignatureExpired too
        raise Unauthorized(EXPIRED) from None
    found = _ticket(payload)
    if found is None:
        raise Unauthorized(EXPIRED)
    if signins.has_ended(session, found.sign_in_id):
        raise Unauthorized("You signed out: sign in to the explorer again")
    accounts.signed_in_buyer(session, found.buyer_id, found.key_id)
    return found


def _ticket(payload: object) -> Ticket | None:
    """The Ticket of a signed payload of the expected shape, else None."""
    if not isinstance(payload, dict) or not all(isinstance(payload.get(k), str) for k in ("b", "k", "s")):
        return None
    query = payload.get("q")
    if not isinstance(query, dict) or not all(
        isinstance(name, str) and isinstance(values, list) and all(isinstance(v, str) for v in values)
        for name, values in query.items()
    ):
        return None
    return Ticket(payload["b"], payload["k"], payload["s"], query)
