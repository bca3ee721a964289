"""The share links screen's state (C8): create a link from the current filters, list
the buyer's links with their filters in words, revoke one after a confirmation.
Store work happens in `watch=True` methods, each through `Account.store()`."""

from __future__ import annotations

import pandas as pd
import param

from explorer.session import Account, SessionLost
from explorer.state import LineupFilters
from explorer.words import describe_filters
from store import links
from store.errors import LineupsError


class SharesModel(param.Parameterized):
    """The buyer's share links (C8): create one from the current filters, list them,
    revoke one after a confirmation."""

    account = param.ClassSelector(class_=Account, constant=True, precedence=-1)
    filters = param.ClassSelector(class_=LineupFilters, constant=True, precedence=-1)
    links = param.DataFrame(default=None, allow_None=True, precedence=-1, doc="""
        The buyer's links, newest first, as `store.links.link_dict` gives them.""")
    show_revoked = param.Boolean(default=False, label="Show revoked links")
    create = param.Event(label="Create share link")
    created_id = param.String(default="", precedence=-1, doc="The id of the link created last.")
    url = param.String(default="", doc="The URL of the link created last.")
    formula = param.String(default="", doc="The spreadsheet formula that imports it.")
    created_summary = param.String(default="")
    pending_revoke = param.String(default="", doc="The link waiting for the confirmation.")
    confirm_revoke = param.Event(label="Yes, revoke it")
    cancel_revoke = param.Event(label="Keep it")
    error = param.String(default="")
    notice = param.String(default="")

    def __init__(self, account: Account, filters: LineupFilters, **params):
        super().__init__(account=account, filters=filters, **params)
        self.reload()

    def reload(self) -> None:
        """Read the buyer's links from the store."""
        try:
            with self.account.store() as (session, buyer):
                rows = [links.link_dict(link) for link in links.list_links(session, buyer.id)]
        except SessionLost:
            return
        self.links = pd.DataFrame(rows, columns=_LINK_COLUMNS)

    @param.depends("create", watch=True)
    def _create(self) -> None:
        context = self.account.context
        try:
            with self.account.store() as (session, buyer):
                link, token = links.create_link(session, buyer, self.filters.to_args(), context.secrets)
                summary = describe_filters(link.filters, self.account.feed_names)
        except SessionLost:
            return
        except LineupsError as error:
            self.param.update(error=error.message, notice="", url="", formula="")
            return
        url = links.url_for(context.base_url, token)
        self.param.update(
            created_id=link.id, url=url, formula=f'=IMPORTDATA("{url}")', created_summary=summary, error="",
            notice="Link created. Anyone who has the URL can read these rows until you revoke it.",
        )
        self.reload()

    def request_revoke(self, link_id: str) -> None:
        """Ask for the confirmation of revoking `link_id` (one of the listed links)."""
        listed = self.links if self.links is not None else pd.DataFrame(columns=_LINK_COLUMNS)
        row = listed[listed["id"] == link_id]
        if row.empty:
            return
        if _short_text(row["revoked_at"].iloc[0]):
            self.param.update(notice="This link is revoked already.", pending_revoke="")
            return
        self.param.update(pending_revoke=link_id, notice="", error="")

    @param.depends("confirm_revoke", watch=True)
    def _revoke(self) -> None:
        if not self.pending_revoke:
            return
        try:
            with self.account.store() as (session, buyer):
                links.revoke_link(session, links.find_link(session, self.pending_revoke, buyer.id))
        except SessionLost:
            return
        except LineupsError as error:
            self.param.update(error=error.message, pending_revoke="")
            return
        if self.pending_revoke == self.created_id:
            self.param.update(created_id="", url="", formula="", created_summary="")
        self.param.update(pending_revoke="", notice="Link revoked: requests through it now get 401.")
        self.reload()

    @param.depends("cancel_revoke", watch=True)
    def _cancel(self) -> None:
        self.pending_revoke = ""

    @param.depends("links", "show_revoked")
    def table(self) -> pd.DataFrame:
        """The links as the list shows them: filters in words, times, use count."""
        listed = self.links if self.links is not None else pd.DataFrame(columns=_LINK_COLUMNS)
        if not self.show_revoked:
            listed = listed[listed["revoked_at"].isna()]
        names = self.account.feed_names
        return pd.DataFrame(
            {
                "id": listed["id"].astype(object),
                "filters": pd.Series([describe_filters(f, names) for f in listed["filters"]], index=listed.index, dtype=object),
                "created": listed["created_at"].map(_short_text).astype(object),
                "last_used": listed["last_used_at"].map(lambda t: _short_text(t) or "never").astype(object),
                "uses": listed["use_count"].astype(int),
                "status": listed["revoked_at"].map(lambda t: f"revoked {_short_text(t)}" if _short_text(t) else "active").astype(object),
            }
        ).reset_index(drop=True)

    @param.depends("pending_revoke", "links")
    def pending_summary(self) -> str:
        if not self.pending_revoke or self.links is None:
            return ""
        row = self.links[self.links["id"] == self.pending_revoke]
        if row.empty:
            return ""
        return describe_filters(row["filters"].iloc[0], self.account.feed_names)


_LINK_COLUMNS = ["id", "buyer_id", "filters", "query", "created_at", "last_used_at", "use_count", "revoked_at"]


def _short_text(value: str | None) -> str:
    """A C1 time as `YYYY-MM-DD HH:MM UTC`."""
    if not isinstance(value, str) or not value:
        return ""
    return value.replace("T", " ")[:16] + " UTC"
