"""The explorer: the three screens in tabs under a header with the buyer's name and
a logout link, the connection banner, and the lineup filters kept in the page's
address (issue 17, item 6): `/explorer?port=BRSSZ&commodity=Soybeans&latest=true`
opens filtered (the API's parameter names and values), every filter change rewrites
the address (reload, back, bookmark, send), and a bare `/explorer` opens on upcoming
calls (from today)."""

from __future__ import annotations

import html
from urllib.parse import urlencode

import panel as pn
import param
from panel.viewable import Viewer

from explorer.auth import LOGOUT_PATH
from explorer.markup import html_text, md
from explorer.session import Account
from explorer.feeds import FeedsModel
from explorer.shares import SharesModel
from explorer.filters import LineupFilters, today
from explorer.state import VIEW_ARGS, LineupsModel
from explorer.views.connection import ConnectionBanner
from explorer.views.feeds import FeedsView
from explorer.views.lineups import LineupsView
from explorer.views.shares import SharesView

HEADER_CSS = """
:host { width: 100%; }
.bar { display: flex; align-items: center; justify-content: space-between; background: #0b3c5d;
       color: #fff; padding: 10px 20px; font-family: system-ui, sans-serif; border-radius: 4px; }
.bar h1 { font-size: 1.25rem; margin: 0; font-weight: 600; }
.bar .who { font-size: .95rem; }
.bar a { color: #fff; margin-left: 18px; font-weight: 600; }
"""


def addressed_lineups(account: Account, read: bool = True) -> tuple[LineupsModel, str]:
    """The buyer's lineups under the filters, order, page and columns of the page's
    address (`opened_filters`, `LineupsModel.view_params`) and what of the address
    could not be used; `read` as `LineupsModel`'s."""
    args = address_args()
    shown = {name: args.pop(name) for name in VIEW_ARGS if name in args}
    filters = LineupFilters.of(account)
    ignored = opened_filters(filters, account, args)
    view, unused = LineupsModel.view_params(shown)
    ignored += unused
    notice = ("Some of this address was left out: " + "; ".join(ignored) + ".") if ignored else ""
    return LineupsModel(account, read=read, filters=filters, **view), notice


def address_args() -> dict[str, str]:
    """The page's query arguments (the first value of each), without Bokeh's own."""
    raw = pn.state.session_args if pn.state.curdoc is not None else {}
    return {k: v[0].decode("utf-8", "replace") for k, v in raw.items() if v and not k.startswith("bokeh-")}


def opened_filters(filters: LineupFilters, account: Account, args: dict[str, str]) -> list[str]:
    """Set `filters` from the address's filter arguments `args`, or to upcoming calls
    when there are none; returns what of them could not be used, in words."""
    if not args:
        filters.reset(today())
        return []
    return filters.set_args(args, account.context.taxonomy)


class Explorer(Viewer):
    """The whole app for one signed-in buyer."""

    account = param.ClassSelector(class_=Account, constant=True)
    lineups = param.ClassSelector(class_=LineupsModel, constant=True, precedence=-1)
    shares = param.ClassSelector(class_=SharesModel, constant=True, precedence=-1)
    feeds = param.ClassSelector(class_=FeedsModel, constant=True, precedence=-1)
    tab = param.Integer(default=0, bounds=(0, 2), doc="The screen shown: lineups, share links, feeds.")
    logout_url = param.String(default=LOGOUT_PATH, constant=True, doc="""
        Where the header's logout link goes; empty: no link (the notebook has no login).""")
    notice = param.String(default="", doc="What of the address's filters could not be used.")
    banner = param.Boolean(default=True, constant=True, doc="""
        Whether the explorer shows its own connection banner (False: the page that
        holds it shows one already, `explorer.app.explorer_page`).""")

    @classmethod
    async def opened(cls, account: Account, **params) -> "Explorer":
        """The explorer with its first page of rows already read (off the event loop),
        so that the page draws its table once, with the rows; the charts follow."""
        lineups, notice = addressed_lineups(account, read=False)
        await lineups.read_first()
        return cls(account, lineups=lineups, notice=notice, **params)

    def __init__(self, account: Account, **params):
        lineups = params.pop("lineups", None)
        if lineups is None:
            lineups, params["notice"] = addressed_lineups(account)
        params.setdefault("shares", SharesModel(account, lineups.filters))
        params.setdefault("feeds", FeedsModel(account=account))
        super().__init__(account=account, lineups=lineups, **params)
        # Screens not shown yet are built when first opened: the first view is faster.
        # (`pn.panel(function, lazy=True)` would call the function at once.)
        self._tabs = pn.Tabs(
            ("Lineups", LineupsView(model=self.lineups)),
            ("Share links", pn.param.ParamFunction(lambda: SharesView(model=self.shares), lazy=True)),
            ("Feeds", pn.param.ParamFunction(lambda: FeedsView(model=self.feeds), lazy=True)),
            active=self.tab, dynamic=True, sizing_mode="stretch_width", css_classes=["explorer-tabs"],
        )
        self._tabs.link(self, active="tab", bidirectional=True)
        self._banner = ConnectionBanner() if self.banner else None
        # The table's order, page and columns are in the address too (issue 45 item 7).
        # (Watched here: with "lineups.filters.param", param left the model's own
        # parameters of one `depends` unwatched.)
        self.lineups.param.watch(self._write_address, ["sort_by", "descending", "page", "columns"])
        if pn.state.curdoc is not None:
            pn.state.onload(self._write_address)  # the address names the filters shown

    @param.depends("lineups.filters.param", watch=True)
    def _write_address(self, *_events) -> None:
        location = pn.state.location
        if location is not None:
            args = {**self.lineups.filters.url_args(), **self.lineups.view_args()}
            location.search = "?" + urlencode(args, safe=",")

    @param.depends("tab", watch=True, on_init=True)
    def _opened(self) -> None:
        """Read a screen's data when it is shown: the feeds' coverage once, the share
        links (use counts move) every time."""
        if self.tab == 1:
            param.parameterized.async_executor(self.shares.reload)
        elif self.tab == 2 and not self.feeds.feeds:
            self.feeds.param.trigger("refresh")

    @param.depends("account.lost", watch=True)
    def _session_lost(self) -> None:
        """Back to the login page: reloading makes the server re-check the session,
        which now fails and redirects."""
        location = pn.state.location
        if self.account.lost and location is not None:
            location.reload = True

    def _header(self) -> pn.pane.HTML:
        name = html_text(self.account.buyer_name)
        logout = f'<a href="{html.escape(self.logout_url)}" class="logout">Log out</a>' if self.logout_url else ""
        return pn.pane.HTML(
            f'<div class="bar"><h1>Lineups explorer</h1><div class="who">Signed in as <b>{name}</b>'
            f"{logout}</div></div>",
            stylesheets=[HEADER_CSS], sizing_mode="stretch_width", margin=(0, 0, 10, 0),
        )

    @param.depends("notice")
    def _notice(self):
        if not self.notice:
            return pn.Spacer(height=0)
        return pn.pane.Alert(md(self.notice), alert_type="warning", css_classes=["address-notice"])

    def __panel__(self):
        banner = [self._banner] if self._banner else []
        return pn.Column(*banner, self._header(), self._notice, self._tabs, sizing_mode="stretch_width")
