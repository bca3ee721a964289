"""Serving the explorer: the Panel app at /explorer, behind the login, as one Tornado
application that the server entry point mounts beside the API.

`ExplorerApp` builds Bokeh's Tornado application with the prefix `/explorer`: the
Panel page, its websocket and static resources, and the login and logout pages all
live under that prefix, so the API application can route the one path
`/explorer(/...)` to it (a Tornado application is a valid route target) and keep
its own handling — JSON 404/405 bodies included — for every other path:

    explorer = ExplorerApp(context, websocket_origins=origins_for(base_url, host, port))
    app = api.app.make_app(settings, sessions, service, extra_routes=explorer.routes())
    HTTPServer(app).listen(port, host)
    explorer.start()          # inside the running IOLoop, after any fork

The websocket accepts only the origins given (the served host), compared exactly:
scheme, host and port (`OriginCheckedWSHandler`; Bokeh's own check ignores the
scheme and refuses `https://host` against `host:443`, the origin a browser sends
for a page on the default port). The Bokeh session ids and tokens are signed with
a key derived from the signing secret.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Iterable, Sequence
from urllib.parse import urlsplit

import panel as pn
from bokeh.server.tornado import BokehTornado
from bokeh.server.util import create_hosts_allowlist
from panel.io.application import build_applications
from panel.io.server import DIST_DIR, INDEX_HTML
from panel.io.server import WSHandler as PanelWSHandler
from tornado.ioloop import IOLoop
from tornado.web import RequestHandler, StaticFileHandler

from explorer.auth import (
    APP_PATH, TOKEN_EXCLUDED_HEADERS, CookieCodec, DownloadHandler, ExplorerAuth, IdentityInToken, LoginHandler,
    LogoutHandler, SignInLimiter, identity_of_token,
)
from explorer import ROUTE, charts
from explorer.headers import ExplorerHeaders
from explorer.session import Account, ExplorerContext, SessionLost
from explorer.state import empty_rows
from store.errors import NotFound
from explorer.views import Explorer
from explorer.views.connection import ConnectionBanner

TITLE = "Lineups explorer"
log = logging.getLogger("lineups.explorer")


def explorer_page(context: ExplorerContext) -> pn.viewable.Viewable:
    """The app of one browser session: the explorer of the signed-in buyer, or a
    notice that sends the browser back to the login page. The account and the first
    page of rows are read from the store on the explorer's threads once the page is
    up (never on the event loop), and the explorer then takes the notice's place.
    The connection banner comes with the first document, so that its code (which
    keeps tables in step with their data) is loaded before the explorer's tables."""
    identity = identity_of_token(pn.state.curdoc.session_context.token_payload)
    if identity is None:
        return _session_ended()
    banner = ConnectionBanner()
    opening = pn.pane.Markdown("*Opening your lineups…*", css_classes=["opening"])
    page = pn.Column(banner, opening, sizing_mode="stretch_width")

    async def open_account() -> None:
        try:
            account = await context.off_loop(Account.open, context, identity)
        except SessionLost:
            page.objects = [_session_ended()]
            return
        page.objects = [banner, await Explorer.opened(account, banner=False)]

    pn.state.onload(open_account)
    return page


def _session_ended() -> pn.viewable.Viewable:
    if pn.state.location is not None:
        pn.state.location.reload = True
    return pn.pane.Markdown("Your session has ended. [Sign in again](login).")


class NotFoundHandler(RequestHandler):
    """Unknown paths under /explorer: the contract's JSON 404 body (C5), like the API's."""

    def prepare(self) -> None:
        self.set_status(404)
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(NotFound(f"No such resource: {self.request.path}").to_json())


def warm_up() -> None:
    """Render the explorer's kinds of components once, without data, so that the
    first buyer after a start does not pay Panel's and Bokeh's first-use costs
    (the same idea as `panel serve --warm`)."""
    empty = empty_rows()
    weekly, status = charts.weekly_quantity_chart([charts.UNRESOLVED]), charts.status_by_port_chart()
    charts.draw_weekly_quantity(weekly, charts.weekly_quantity(empty))
    charts.draw_status_by_port(status, charts.status_by_port(empty))
    pn.Column(
        "Markdown", pn.pane.Bokeh(weekly), pn.pane.Bokeh(status),
        pn.widgets.Tabulator(empty.iloc[:, :3], pagination="remote"),
    ).get_root()


def origins_for(base_url: str, host: str | None = None, port: int | None = None) -> list[str]:
    """The `host:port` pairs whose pages may open the explorer's websocket: the
    public base URL's, and the listening address's when it is a concrete one."""
    parts = urlsplit(base_url)
    default = 443 if parts.scheme == "https" else 80
    origins = [f"{parts.hostname}:{parts.port or default}"]
    if host and host not in ("0.0.0.0", "::", "") and port:
        origins.append(f"{host}:{port}")
        if host in ("127.0.0.1", "localhost"):
            origins.append(f"{'localhost' if host == '127.0.0.1' else '127.0.0.1'}:{port}")
    return list(dict.fromkeys(origins))


def exact_origins(base_url: str, host_ports: Iterable[str]) -> frozenset[str]:
    """The origins (`scheme://host:port`) of `origins_for`'s `host:port` pairs: the
    base URL's with its scheme, the listening address's over plain http."""
    parts = urlsplit(base_url)
    public = f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"
    return frozenset(f"{parts.scheme if hp == public else 'http'}://{hp}" for hp in host_ports)


def normalised_origin(origin: str) -> str | None:
    """`scheme://host:port` of an Origin header (the port made explicit), or None
    for anything that is not a plain http(s) origin."""
    try:
        parts = urlsplit(origin.strip().lower())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
        return None
    if parts.path or parts.query or parts.fragment:
        return None
    return f"{parts.scheme}://{parts.hostname}:{port or (443 if parts.scheme == 'https' else 80)}"


class OriginCheckedWSHandler(PanelWSHandler):
    """Panel's websocket handler, opened only from the explorer's own origins: the
    page's scheme, host and port must be exactly one of them (no look-alike host,
    no other port or scheme). `BOKEH_ALLOW_WS_ORIGIN` does not widen it. (Tornado
    itself accepts, before asking, an Origin whose host and port are the request's
    Host header, and a request without an Origin, which no browser sends.)"""

    #: Set per application by `ExplorerApp`.
    allowed_origins: frozenset[str] = frozenset()

    def check_origin(self, origin: str) -> bool:
        if normalised_origin(origin) in self.allowed_origins:
            return True
        log.warning("Refused the explorer's websocket from origin %r", origin[:200])
        return False


def _session_key(secret: str) -> str:
    """Bokeh's session-signing key: derived from, never equal to, the cookie secret."""
    return hashlib.sha256(f"lineups.explorer.bokeh-session:{secret}".encode()).hexdigest()


class ExplorerApp:
    """The explorer as a Tornado application served under /explorer."""

    def __init__(
        self, context: ExplorerContext, websocket_origins: Sequence[str], secure_cookie: bool | None = None,
        sign_in_limiter: SignInLimiter | None = None,
    ):
        """`sign_in_limiter` counts sign-in attempts per client address (the API's
        rate limiter, given by the server entry point; issue 16 item 8)."""
        codec = CookieCodec(context.secrets)
        if secure_cookie is None:
            secure_cookie = context.base_url.startswith("https:")
        page_args = {
            "sessions": context.sessions, "codec": codec, "secure": secure_cookie,
            "is_live": context.book.is_live, "end": context.book.end, "limiter": sign_in_limiter,
            "usage": context.usage,
        }
        def page() -> pn.viewable.Viewable:
            # A plain function: Panel calls functions per session (a partial it would
            # wrap as a reactive pane instead).
            return explorer_page(context)

        applications = build_applications({"/": page}, title=TITLE)
        for application in applications.values():
            application.add(IdentityInToken(codec))
        self.tornado = BokehTornado(
            applications,
            prefix=APP_PATH,
            extra_websocket_origins=create_hosts_allowlist(list(websocket_origins), None),
            auth_provider=ExplorerAuth(context.sessions, codec, context.book.is_live),
            extra_patterns=[
                ("/login", LoginHandler, page_args), ("/logout", LogoutHandler, page_args),
                ("/download", DownloadHandler, page_args),
                # The page asks for its icon under the prefix; Bokeh serves it at the root only.
                (r"/(favicon\.ico)", StaticFileHandler, {"path": str(DIST_DIR / "images")}),
            ],
            index=INDEX_HTML,
            ico_path=str(DIST_DIR / "images" / "favicon.ico"),
            secret_key=_session_key(context.secrets[0]),
            sign_sessions=True,
            # The page embeds the session token: no cookie and no credential in it
            # (issue 49 item 1); the identity comes from `IdentityInToken`.
            include_cookies=[],
            exclude_headers=TOKEN_EXCLUDED_HEADERS,
            default_handler_class=NotFoundHandler,
        )
        self.tornado.add_transform(ExplorerHeaders)
        self._check_origins(exact_origins(context.base_url, websocket_origins))
        self._started = False

    def _check_origins(self, allowed: frozenset[str]) -> None:
        """Serve the websocket with `OriginCheckedWSHandler` (a subclass per app, so
        that several explorers in one process keep their own origins)."""
        handler = type("ExplorerWSHandler", (OriginCheckedWSHandler,), {"allowed_origins": allowed})
        rules = [r for r in self.tornado.wildcard_router.rules if r.target is PanelWSHandler]
        if len(rules) != 1:
            raise RuntimeError(f"expected one Panel websocket route, found {len(rules)}")
        rules[0].target = handler

    def routes(self) -> list[tuple]:
        """The route that hands every /explorer request to this application."""
        return [(ROUTE, self.tornado)]

    def start(self) -> None:
        """Start Bokeh's session housekeeping on the current IOLoop (call once the
        loop runs, in the serving process)."""
        if not self._started:
            warm_up()
            self.tornado.initialize(IOLoop.current())
            self.tornado.start()
            self._started = True

    def stop(self) -> None:
        if self._started:
            self.tornado.stop()
            self._started = False
