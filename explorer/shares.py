"""The share links screen's state (C8): create a link from the current filters, list
the buyer's links with their names and filters in words, copy a listed link's URL
again, revoke one after a confirmation. Store work happens in `watch=True` methods,
each awaiting `Account.run()` (the explorer's threads, never the event loop). A write
waits at most `WRITE_WAIT_S` for another process's write lock; past it, or with the
store out of reach, the screen says the store is busy and to try again (`StoreBusy`)."""

from __future__ import annotations

import pandas as pd
import param

from explorer.session import Account, SessionLost, StoreBusy
from explorer.filters import LineupFilters
from explorer.words import describe_filters, problem
from store.access import links
from store.database.db import sqlite_busy_timeout
from store.errors import LineupsError
from store.database.schema import ShareLink

#: Seconds a link's creation or revocation waits for another process's write lock
#: (SQLite) before the buyer is told that the store is busy.
WRITE_WAIT_S = 5.0


class SharesModel(param.Parameterized):
    """The buyer's share links (C8): create one from the current filters, list them,
    revoke one after a confirmation."""

    account = param.ClassSelector(class_=Account, constant=True, precedence=-1)
    filters = param.ClassSelector(class_=LineupFilters, constant=True, precedence=-1)
    links = param.DataFrame(default=None, allow_None=True, precedence=-1, doc="""
        The buyer's links, newest first, as `store.access.links.link_dict` gives them.""")
    show_revoked = param.Boolean(default=False, label="Show revoked links")
    link_name = param.String(default="", label="Name (optional)", doc="What the buyer calls the next link.")
    create = param.Event(label="Create share link")
    created_id = param.String(default="", precedence=-1, doc="The id of the link created last.")
    url = param.String(default="", doc="The URL of the link created (or picked to copy) last.")
    formula = param.String(default="", doc="The spreadsheet formula that imports it.")
    created_summary = param.String(default="")
    copy_id = param.String(default="", precedence=-1, doc="A listed link whose URL to show again.")
    pending_revoke = param.String(default="", doc="The link waiting for the confirmation.")
    confirm_revoke = param.Event(label="Yes, revoke it")
    cancel_revoke = param.Event(label="Keep it")
    error = param.String(default="")
    notice = param.String(default="")

    def __init__(self, account: Account, filters: LineupFilters, **params):
        super().__init__(account=account, filters=filters, **params)
        param.parameterized.async_executor(self.reload)

    async def reload(self) -> None:
        """Read the buyer's links from the store."""
        try:
            rows = await self.account.run(
                lambda session, buyer: [_listed(link) for link in links.list_links(session, buyer.id)]
            )
        except SessionLost:
            return
        self.links = pd.DataFrame(rows, columns=_LINK_COLUMNS)

    @param.depends("create", watch=True)
    async def _create(self) -> None:
        context = self.account.context
        args, name = self.filters.to_args(), self.link_name.strip()[:80]

        def create(session, buyer):
            with sqlite_busy_timeout(session, WRITE_WAIT_S):
                link, token = links.create_link(session, buyer, args, context.secrets)
                if name:
                    link.label = name
                    session.flush()
            return link.id, token, describe_filters(link.filters, self.account.feed_names)

        try:
            link_id, token, summary = await self.account.run(create)
        except SessionLost:
            return
        except LineupsError as error:
            self.param.update(error=problem(error), notice="", url="", formula="")
            return
        except StoreBusy as busy:
            self.param.update(error=f"No link was created: {busy.message}", notice="", url="", formula="")
            return
        url = links.url_for(context.base_url, token)
        self.param.update(
            created_id=link_id, url=url, formula=f'=IMPORTDATA("{url}")', link_name="",
            created_summary=f"{name} · {summary}" if name else summary, error="",
            notice="Link created. Anyone who has the URL can read these rows until you revoke it.",
        )
        await self.reload()

    @param.depends("copy_id", watch=True)
    async def _copy_again(self) -> None:
        """Show a listed link's URL and formula again (its token, signed afresh)."""
        link_id = self.copy_id
        if not link_id:
            return
        secrets = self.account.context.secrets

        def token(session, buyer):
            link = links.find_link(session, link_id, buyer.id)
            return None if link.revoked_at else (links.token_for(link, secrets), _title(link.label, link.filters, self.account.feed_names))

        try:
            found = await self.account.run(token)
        except SessionLost:
            return
        except LineupsError:
            found = None
        self.copy_id = ""
        if found is None:
            self.param.update(notice="", error="This link is revoked: it cannot be used any more.")
            return
        url = links.url_for(self.account.context.base_url, found[0])
        self.param.update(created_id=link_id, url=url, formula=f'=IMPORTDATA("{url}")', created_summary=found[1], error="", notice="")

    def request_revoke(self, link_id: str) -> None:
        """Ask for the confirmation of revoking `link_id` (one of the listed links)."""
        listed = self.links if self.links is not None else pd.DataFrame(columns=_LINK_COLUMNS)
        row = listed[listed["id"] == link_id]
        if row.empty:
            return
        if _short_text(row["revoked_at"].iloc[0]):
            self.param.update(notice="", error="This link is already revoked: nothing was changed.", pending_revoke="")
            return
        self.param.update(pending_revoke=link_id, notice="", error="")

    @param.depends("confirm_revoke", watch=True)
    async def _revoke(self) -> None:
        link_id = self.pending_revoke
        if not link_id:
            return

        def revoke(session, buyer):
            link = links.find_link(session, link_id, buyer.id)
            already = link.revoked_at is not None
            with sqlite_busy_timeout(session, WRITE_WAIT_S):
                links.revoke_link(session, link)
            return already

        try:
            already = await self.account.run(revoke)
        except SessionLost:
            return
        except LineupsError as error:
            self.param.update(error=problem(error), pending_revoke="")
            return
        except StoreBusy as busy:
            self.param.update(error=f"The link was not revoked: {busy.message}", notice="")  # still asked
            return
        if link_id == self.created_id:
            self.param.update(created_id="", url="", formula="", created_summary="")
        if already:
            self.param.update(pending_revoke="", notice="", error="This link was already revoked: nothing was changed.")
        else:
            self.param.update(
                pending_revoke="", error="",
                notice="Link revoked. Spreadsheets and scripts using this link will stop updating.",
            )
        await self.reload()

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
                "filters": pd.Series(
                    [_title(label, f, names) for label, f in zip(listed["label"], listed["filters"])], index=listed.index, dtype=object
                ),
                "created": listed["created_at"].map(_short_text).astype(object),
                "last_used": listed["last_used_at"].map(lambda t: _short_text(t) or "never").astype(object),
                "uses": listed["use_count"].astype(int),
                "status": listed["revoked_at"].map(lambda t: f"revoked {_short_text(t)}" if _short_text(t) else "active").astype(object),
                # Actions as words in their own cells: none on a revoked link.
                "copy": listed["revoked_at"].map(lambda t: "" if _short_text(t) else "Copy URL").astype(object),
                "revoke": listed["revoked_at"].map(lambda t: "" if _short_text(t) else "Revoke").astype(object),
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


_LINK_COLUMNS = ["id", "buyer_id", "filters", "query", "created_at", "last_used_at", "use_count", "revoked_at", "label"]


def _listed(link: ShareLink) -> dict:
    return {**links.link_dict(link), "label": link.label}


def _title(label: str | None, filters: dict, feed_names: dict[str, str]) -> str:
    """A link as the list names it: its name (if any) and its filters in words."""
    words = describe_filters(filters, feed_names)
    return f"{label} · {words}" if isinstance(label, str) and label else words


def _short_text(value: str | None) -> str:
    """A C1 time as `YYYY-MM-DD HH:MM UTC`."""
    if not isinstance(value, str) or not value:
        return ""
    return value.replace("T", " ")[:16] + " UTC"
