"""The explorer: the three screens in tabs under a header with the buyer's name and
a logout link."""

from __future__ import annotations

import html

import panel as pn
import param
from panel.viewable import Viewer

from explorer.auth import LOGOUT_PATH
from explorer.session import Account
from explorer.feeds import FeedsModel
from explorer.shares import SharesModel
from explorer.state import LineupsModel
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


class Explorer(Viewer):
    """The whole app for one signed-in buyer."""

    account = param.ClassSelector(class_=Account, constant=True)
    lineups = param.ClassSelector(class_=LineupsModel, constant=True, precedence=-1)
    shares = param.ClassSelector(class_=SharesModel, constant=True, precedence=-1)
    feeds = param.ClassSelector(class_=FeedsModel, constant=True, precedence=-1)
    tab = param.Integer(default=0, bounds=(0, 2), doc="The screen shown: lineups, share links, feeds.")
    logout_url = param.String(default=LOGOUT_PATH, constant=True, doc="""
        Where the header's logout link goes; empty: no link (the notebook has no login).""")

    def __init__(self, account: Account, **params):
        lineups = params.pop("lineups", None) or LineupsModel(account)
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

    @param.depends("tab", watch=True, on_init=True)
    def _opened(self) -> None:
        """Read a screen's data when it is shown: the feeds' coverage once, the share
        links (use counts move) every time."""
        if self.tab == 1:
            self.shares.reload()
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
        name = html.escape(self.account.buyer_name)
        logout = f'<a href="{html.escape(self.logout_url)}" class="logout">Log out</a>' if self.logout_url else ""
        return pn.pane.HTML(
            f'<div class="bar"><h1>Lineups explorer</h1><div class="who">Signed in as <b>{name}</b>'
            f"{logout}</div></div>",
            stylesheets=[HEADER_CSS], sizing_mode="stretch_width", margin=(0, 0, 10, 0),
        )

    def __panel__(self):
        return pn.Column(self._header(), self._tabs, sizing_mode="stretch_width")
