"""Sign-in for the explorer: the session cookie, the login and logout pages, and the
Bokeh auth provider that guards the Panel app (issue 6, "Login").

A buyer signs in with an API key. The key is checked exactly as the API checks it
(`store.access.accounts.authenticate`, C5) and is then forgotten: the session cookie carries
only the buyer id, the key's row id and a random id of this sign-in, signed with the
service's first signing secret (all of them verify, so a secret roll-over keeps
sessions alive). The cookie
is HttpOnly, SameSite=Lax, limited to `/explorer`, and Secure when the service is
served over https.

Sign-in attempts are counted per client address by the API's rate limiter, passed in
by the server entry point (`cli/serve.py`), under the same name as the API's requests
with unknown keys (`addr:<address>`): guesses through the form and through the API
share one budget (C5: 100 a minute), and one more is refused with 429 (issue 16 item 8).

Nothing is trusted from the cookie beyond "this browser signed in with that key":
every page load, websocket handshake and explorer action re-reads the key and the
buyer from the store (`check`), so a revoked key or a suspended buyer loses the
session at once; and asks the session book (`explorer.session.SessionBook`) whether
the sign-in was ended by a logout, so that logging out ends it on the server, for
every tab and for a copy of the cookie.
"""

from __future__ import annotations

import dataclasses
import html
import secrets
from typing import Any, Callable, Mapping, Protocol
from urllib.parse import quote, urlsplit

from bokeh.application.handlers.handler import Handler
from bokeh.server.auth_provider import AuthProvider
from sqlalchemy.orm import Session, sessionmaker
from tornado.ioloop import IOLoop
from tornado.web import RequestHandler, create_signed_value, decode_signed_value

from store.access import accounts, downloads
from store.access.usage import UsageWriter
from store.database.db import transaction
from store.errors import LineupsError, RateLimited, Unauthorized
from store.database.schema import Buyer

APP_PATH = "/explorer"
LOGIN_PATH = "/explorer/login"
LOGOUT_PATH = "/explorer/logout"
DOWNLOAD_PATH = "/explorer/download"
#: Where a download is streamed from: the API beside the explorer (`lineups serve`).
DOWNLOAD_TARGET = "/v1/download/"
COOKIE = "lineups_explorer"
#: The key of the signed-in identity in a Bokeh session's token (`IdentityInToken`).
TOKEN_IDENTITY = "lineups_identity"
#: Request headers never copied into a Bokeh session's token (page script reads the
#: token): the cookies, and any credential a client or proxy sends (issue 49 item 1).
TOKEN_EXCLUDED_HEADERS = ["Cookie", "Authorization", "Proxy-Authorization", "X-Api-Key"]
#: How long a signed session cookie stays valid, whatever the browser keeps.
MAX_AGE_DAYS = 7


@dataclasses.dataclass(frozen=True)
class Identity:
    """Who signed in: the buyer, the row of the API key they used, and the id of
    this sign-in (which a logout ends)."""

    buyer_id: str
    key_id: str
    session_id: str

    def text(self) -> str:
        return f"{self.buyer_id} {self.key_id} {self.session_id}"

    @classmethod
    def parse(cls, text: str) -> "Identity | None":
        parts = text.split(" ")
        return cls(*parts) if len(parts) == 3 and all(parts) else None


class CookieCodec:
    """Signs and reads the session cookie with the service's signing secrets
    (newest first: the first signs, all verify)."""

    def __init__(self, secrets: tuple[str, ...]):
        if not secrets:
            raise ValueError("the explorer needs at least one signing secret")
        self.secrets = secrets

    def encode(self, identity: Identity) -> str:
        return create_signed_value(self.secrets[0], COOKIE, identity.text()).decode("ascii")

    def decode(self, value: str | None) -> Identity | None:
        """The identity in a cookie value; None when absent, altered, or too old."""
        if not value:
            return None
        for secret in self.secrets:
            raw = decode_signed_value(secret, COOKIE, value, max_age_days=MAX_AGE_DAYS)
            if raw is not None:
                return Identity.parse(raw.decode("utf-8", "replace"))
        return None


def login(session: Session, key: str) -> Identity:
    """The identity of an API key, checked as the API checks it (C5). Only reads: the
    key's use is the caller's to note (`UsageWriter.key_used`), so that a sign-in
    never waits for a writer (issue 16 item 1).

    Raises Unauthorized for a missing, malformed, unknown or revoked key and
    Forbidden for a key of a suspended buyer."""
    key = (key or "").strip()
    buyer = accounts.authenticate(session, key, touch=False)
    row = accounts.find_key(session, key)
    return Identity(buyer.id, row.id, secrets.token_urlsafe(16))


def check(session: Session, identity: Identity) -> Buyer:
    """The buyer behind a session, re-read from the store.

    Raises Unauthorized when the key is gone, revoked or no longer the buyer's, and
    Forbidden when the buyer is suspended."""
    return accounts.signed_in_buyer(session, identity.buyer_id, identity.key_id)


def current_identity(
    sessions: sessionmaker[Session], codec: CookieCodec, cookie: str | None,
    is_live: Callable[[str], bool] = lambda session_id: True,
) -> Identity | None:
    """The identity of a cookie value when its sign-in is live (`is_live`) and the
    store still accepts it, else None."""
    identity = codec.decode(cookie)
    if identity is None or not is_live(identity.session_id):
        return None
    try:
        with transaction(sessions) as session:
            check(session, identity)
    except LineupsError:
        return None
    return identity


class ExplorerAuth(AuthProvider):
    """Guards the Panel app: Bokeh asks `get_user` on every page load and websocket
    handshake and sends whoever has no valid session to the login page.

    The login and logout pages are not this provider's handlers (Bokeh would mount
    them without arguments); `explorer_routes` mounts them with their dependencies."""

    def __init__(self, sessions: sessionmaker[Session], codec: CookieCodec, is_live: Callable[[str], bool]):
        self._sessions = sessions
        self._codec = codec
        self._is_live = is_live
        super().__init__()

    @property
    def get_user_async(self):
        # The store is read on a thread: never on the event loop the API shares.
        async def user(handler: RequestHandler) -> str | None:
            identity = await IOLoop.current().run_in_executor(
                None, current_identity, self._sessions, self._codec, handler.get_cookie(COOKIE), self._is_live
            )
            return identity.text() if identity else None

        return user

    @property
    def login_url(self) -> str:
        # Panel redirects to "." + login_url, relative to the requested page, which is
        # /explorer or /explorer/; Bokeh's own handlers join it to the prefix. "/.."
        # resolves to /explorer/login from either page and for either joining rule.
        return "/.." + LOGIN_PATH


class IdentityInToken(Handler):
    """Puts the signed-in identity, never the cookie, into each Bokeh session's token.

    Bokeh copies the request's cookies and headers into the session token that the
    page embeds, where page script can read it: the HttpOnly session cookie would be
    readable, and a lifted copy would open the explorer elsewhere (issue 49 item 1).
    `ExplorerApp` has Bokeh copy no cookie and none of `TOKEN_EXCLUDED_HEADERS`; this
    handler adds the identity of the request's cookie (`buyer_id key_id session_id`,
    which signs nothing and opens nothing by itself) under `TOKEN_IDENTITY`, where
    `identity_of_token` finds it. Bokeh signs the token, so the page cannot alter it;
    the websocket's own cookie is checked again by `ExplorerAuth` on the handshake."""

    def __init__(self, codec: CookieCodec):
        super().__init__()
        self._codec = codec

    def modify_document(self, doc) -> None:
        """Nothing: the page's document is the app's (`explorer.app.explorer_page`)."""

    def process_request(self, request) -> dict[str, str]:
        morsel = request.cookies.get(COOKIE)
        identity = self._codec.decode(morsel.value if morsel is not None else None)
        return {TOKEN_IDENTITY: identity.text()} if identity is not None else {}


def identity_of_token(payload: Mapping) -> Identity | None:
    """The identity `IdentityInToken` put into a session token's payload, if any."""
    text = payload.get(TOKEN_IDENTITY)
    return Identity.parse(text) if isinstance(text, str) else None


class SignInLimiter(Protocol):
    """What the sign-in form needs of a rate limiter (the API's `Limiter`): `hit(key)`
    counts an attempt and returns something with `allowed` and `retry_after`."""

    def hit(self, key: str) -> Any: ...


class _AuthPageHandler(RequestHandler):
    """Shared by the login and logout pages: dependencies and the cookie."""

    def initialize(
        self, sessions: sessionmaker[Session], codec: CookieCodec, secure: bool = False,
        is_live: Callable[[str], bool] = lambda session_id: True, end: Callable[[str], None] = lambda session_id: None,
        limiter: SignInLimiter | None = None, usage: UsageWriter | None = None,
    ):
        self.sessions = sessions
        self.codec = codec
        self.secure = secure
        self.is_live = is_live
        self.end = end
        self.limiter = limiter
        self.usage = usage

    def set_default_headers(self) -> None:
        self.set_header("Cache-Control", "no-store")
        self.set_header("Referrer-Policy", "no-referrer")
        self.set_header("X-Frame-Options", "DENY")

    def clear_session(self) -> None:
        self.clear_cookie(COOKIE, path=APP_PATH)


class LoginHandler(_AuthPageHandler):
    """GET shows the sign-in form; POST checks the key and starts the session."""

    async def get(self) -> None:
        notice = ""
        cookie = self.get_cookie(COOKIE)
        if cookie:
            identity = await IOLoop.current().run_in_executor(
                None, current_identity, self.sessions, self.codec, cookie, self.is_live
            )
            if identity is not None:  # signed in already
                self.redirect(self._next())
                return
            # A cookie that brought the browser here no longer opens the app.
            self.clear_session()
            notice = "Your session has ended. Please sign in again."
        if self.get_argument("logged_out", None):
            notice = "You are signed out."
        self.write(login_page(self.xsrf_form_html(), self._next(), notice=notice))

    async def post(self) -> None:
        self.check_xsrf_cookie()
        key = self.get_body_argument("api_key", "")
        try:
            identity = await IOLoop.current().run_in_executor(None, self._login, key, self.request.remote_ip)
        except LineupsError as error:
            self.set_status(error.status)
            if isinstance(error, RateLimited):
                self.set_header("Retry-After", str(error.retry_after))
            message = "That API key is not valid." if isinstance(error, Unauthorized) else error.message
            self.write(login_page(self.xsrf_form_html(), self._next(), error=message))
            return
        self.set_cookie(
            COOKIE,
            self.codec.encode(identity),
            path=APP_PATH,
            httponly=True,
            samesite="Lax",
            secure=self.secure or self.request.protocol == "https",
        )
        self.redirect(self._next())

    def _login(self, key: str, address: str) -> Identity:
        """The identity of `key`, once the attempt is counted (RateLimited beyond)."""
        hit = self.limiter.hit(f"addr:{address}") if self.limiter is not None else None
        if hit is not None and not hit.allowed:
            raise RateLimited(f"Too many sign-in attempts from your address; try again in {hit.retry_after} s",
                              retry_after=hit.retry_after)
        with transaction(self.sessions) as session:
            identity = login(session, key)
        if self.usage is not None:
            self.usage.key_used(accounts.hash_key(key.strip()))
        return identity

    def _next(self) -> str:
        """Where to go after signing in: a path of the explorer only, never elsewhere."""
        home = APP_PATH + "/"  # the app's own address (Panel redirects /explorer there)
        target = self.get_argument("next", home)
        parts = urlsplit(target)
        if parts.scheme or parts.netloc or not parts.path.startswith(APP_PATH) or parts.path.startswith(LOGIN_PATH):
            return home
        return home if parts.path == APP_PATH and not parts.query else target


class LogoutHandler(_AuthPageHandler):
    """Ends the session on the server (every tab, every copy of the cookie) and
    shows the sign-in form again. Touches no store on the event loop: `end` (the
    session book's) remembers the ended sign-in at once and writes it when the
    store allows, so a logout never waits for a writer (issue 49 item 2)."""

    def get(self) -> None:
        identity = self.codec.decode(self.get_cookie(COOKIE))
        if identity is not None:
            self.end(identity.session_id)
        self.clear_session()
        self.redirect(f"{LOGIN_PATH}?logged_out=1")


class DownloadHandler(_AuthPageHandler):
    """GET /explorer/download?<filters as /v1/lineups parameters>: the "Download CSV
    (all rows)" button (issue 49 item 5). A signed-in browser is sent on to the API's
    streamed download of the result, `/v1/download/{ticket}` (a ticket good for a
    minute, `store.access.downloads`), which goes through the API's export slots and
    row ceiling; anyone else to the sign-in page. Nothing of the result passes
    through the explorer, and no store work runs on the event loop."""

    async def get(self) -> None:
        identity = await IOLoop.current().run_in_executor(
            None, current_identity, self.sessions, self.codec, self.get_cookie(COOKIE), self.is_live
        )
        if identity is None:
            self.redirect(f"{LOGIN_PATH}?next={quote(APP_PATH + '/', safe='/')}")
            return
        args = {name: [v.decode("utf-8", "replace") for v in values]
                for name, values in self.request.query_arguments.items()}
        ticket = downloads.ticket_for(self.codec.secrets, identity.buyer_id, identity.key_id, identity.session_id, args)
        self.redirect(f"{DOWNLOAD_TARGET}{ticket}")


def login_page(xsrf_field: str, next_url: str, error: str = "", notice: str = "") -> str:
    """The sign-in page: one field for the API key, no external resources."""
    message = ""
    if error:
        message = f'<p class="error" role="alert">{html.escape(error)}</p>'
    elif notice:
        message = f'<p class="notice">{html.escape(notice)}</p>'
    action = f"{LOGIN_PATH}?next={quote(next_url, safe='/')}"
    return _LOGIN_TEMPLATE.format(action=html.escape(action), xsrf=xsrf_field, message=message)


_LOGIN_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in · Lineups explorer</title>
<link rel="icon" href="favicon.ico">
<style>
 body {{ font-family: system-ui, sans-serif; background: #f4f6f8; margin: 0; }}
 main {{ max-width: 26rem; margin: 12vh auto; background: #fff; padding: 2rem 2.2rem;
        border-radius: 8px; box-shadow: 0 2px 10px rgba(0,0,0,.08); }}
 h1 {{ font-size: 1.4rem; margin: 0 0 .3rem; color: #0b3c5d; }}
 p.lead {{ color: #555; margin: 0 0 1.4rem; }}
 label {{ display: block; font-weight: 600; margin-bottom: .4rem; }}
 input[type=password] {{ width: 100%; box-sizing: border-box; padding: .6rem; font-size: 1rem;
        border: 1px solid #b8c2cc; border-radius: 4px; font-family: monospace; }}
 button {{ margin-top: 1.2rem; width: 100%; padding: .7rem; font-size: 1rem; color: #fff;
        background: #0b5cab; border: 0; border-radius: 4px; cursor: pointer; }}
 .error {{ color: #a30000; background: #fdecec; padding: .6rem; border-radius: 4px; }}
 .notice {{ color: #0b3c5d; background: #e8f1fb; padding: .6rem; border-radius: 4px; }}
</style></head>
<body><main>
<h1>Lineups explorer</h1>
<p class="lead">Sign in with your API key to filter, download and share your lineups.</p>
{message}
<form method="post" action="{action}">
{xsrf}
<label for="api_key">API key</label>
<input type="password" id="api_key" name="api_key" autocomplete="off" placeholder="lk_…" required autofocus>
<button type="submit">Sign in</button>
</form>
</main></body></html>
"""
