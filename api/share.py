"""GET /v1/share/{token}: a share link's whole result as CSV (contract C8, C9).

A spreadsheet (Google Sheets' IMPORTDATA, Excel's or LibreOffice's import from the
web) fetches the URL with no header; the signed token is the credential. Every
request re-checks the link (exists, not revoked: else 401), its buyer (not suspended:
else 403) and its feeds (only feeds still active or trial contribute; none left, or
the link's own feed cancelled: 403). The rows are the /v1/lineups result of the
frozen query, every page, in the API's order, streamed a chunk at a time. A result
over the configured ceiling is a VALIDATION_ERROR asking for narrower filters, never
a silently cut sheet.

Decisions the contract leaves open (docs/share-links.md):
- Requests are rate limited per link (C5); a request with a bad token per client
  address, so that tokens cannot be guessed at speed.
- HEAD answers like GET (same checks, status and headers) without the body, and does
  not count as a use. OPTIONS, which some spreadsheet clients send first, answers
  204 with `Allow: GET, HEAD, OPTIONS`.
- The URL may end in `.csv` (`/v1/share/{token}.csv`): the same link, for
  spreadsheet tools that pick the file type from the URL (LibreOffice does).
- Query parameters on a link URL are ignored (the token fixes the query), so that a
  spreadsheet's cache-busting `?refresh=…` still works.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from sqlalchemy.orm import Session

from api.base import BaseHandler
from api.ratelimit import Hit
from store.access import downloads, links
from store.access.accounts import FeedVersion
from store.errors import Forbidden, RateLimited, Unauthorized, ValidationError
from store.fields import utcnow
from store.query import LineupQuery, file_name, parse_query
from store.reference.taxonomy import default_taxonomy
from store.views import builds
from store.views.lineups import visible_feeds

SHARE_METHODS = ("GET", "HEAD", "OPTIONS")


@dataclasses.dataclass(frozen=True)
class Export:
    """One export to stream: its slot (`ExportSlots.taken`: a link, or an explorer
    sign-in's downloads), the buyer, the query and the feeds it reads."""

    slot: str
    buyer_id: str
    query: LineupQuery
    feeds: Sequence[FeedVersion]


class ShareHandler(BaseHandler):
    """The share-link endpoint; see the module docstring."""

    requires_key = False
    rate_limited = False  # counted per link once the token is read, in `get`

    def set_default_headers(self) -> None:
        super().set_default_headers()
        # A link is a password: no cache keeps the data, no page leaks the URL (C8).
        self.set_header("Cache-Control", "no-store")
        self.set_header("Referrer-Policy", "no-referrer")

    def check_method(self) -> None:
        if self.request.method not in SHARE_METHODS:
            super().check_method()

    async def options(self, token: str) -> None:
        self.set_status(204)
        self.set_header("Allow", ", ".join(SHARE_METHODS))
        self.finish()

    async def get(self, token: str) -> None:
        counted = self.request.method == "GET"
        export = await self.run(self._select, token, self.request.remote_ip, counted)
        # Apart from `_select`, which counts a use: a count that waits for a view being
        # built is asked again (`blocking`), the use counted once.
        self._check_ceiling(await self.blocking(self.deps.lineups.count, export.buyer_id, export.query, export.feeds))
        self.set_default_headers()  # now with the link's rate-limit figures
        if self.request.method == "HEAD":
            # Headers as GET sends them: no body, and no "Content-Length: 0" either,
            # which clients (LibreOffice) read as an empty sheet.
            self.set_header("Content-Type", "text/csv; charset=utf-8")
            await self.flush()
            return self.finish()
        # On the export threads, which are not the API's: a block waits there for a view
        # being built (a change landing in the middle of the export).
        blocks = self.deps.lineups.csv_blocks(
            export.buyer_id, export.query, export.feeds, size=self.deps.export_slots.limits.block_rows, wait=builds.WAIT_S,
        )
        with self.deps.export_slots.taken(export.slot, export.buyer_id):  # 429 beyond (issue 16 item 2)
            await self.stream_csv(lambda: next(blocks, None))

    def _select(self, session: Session, token: str, address: str, counted: bool) -> "Export":
        """Check the link and its entitlement now and count the use."""
        secrets = self.deps.settings.signing_secrets()
        try:
            link, args = links.open_link(session, token, secrets, count_use=False)
        except Unauthorized:
            self._limit(f"addr:{address}")
            raise
        self._limit(f"link:{link.id}")
        if counted:  # written by the background writer: a use never waits for a lock (issue 16 item 1)
            self.deps.usage.link_used(link.id)
        query, _, _ = parse_query(args, default_taxonomy().parse_filter)
        feeds = visible_feeds(session, link.buyer_id, query.source)
        if not feeds:
            raise Forbidden("None of this link's feeds is subscribed any longer")
        session.commit()  # checked on the primary; the rows may come from a replica
        return Export(link.id, link.buyer_id, query, feeds)

    def _check_ceiling(self, rows: int) -> None:
        """A result of more rows than the ceiling is refused, never cut (C8)."""
        ceiling = self.deps.settings.share_ceiling
        if rows > ceiling:
            raise ValidationError(
                f"This link's result has {rows:,} rows, more than the {ceiling:,} a "
                "share link serves; create a link with narrower filters (port, commodity, dates)",
                {"parameter": "token", "reason": "result larger than the share-link ceiling", "rows": rows, "ceiling": ceiling},
            )

    def _limit(self, key: str) -> None:
        hit: Hit = self.deps.limiter.hit(key)
        self.rate_hit = hit
        if not hit.allowed:
            raise RateLimited(
                f"Rate limit of {self.deps.limiter.limit} requests per {self.deps.limiter.window:g} s "
                f"exceeded for this link; retry in {hit.retry_after} s",
                retry_after=hit.retry_after,
            )


class DownloadHandler(ShareHandler):
    """GET /v1/download/{ticket}: the explorer's "Download CSV (all rows)" (issue 49
    item 5), streamed as a share link's CSV is, through the same export slots (per
    sign-in, per buyer, per process: 429 beyond) and row ceiling (a VALIDATION_ERROR
    beyond, never a cut file), with `Content-Disposition: attachment`. The explorer
    sends the browser here with a ticket good for a minute
    (`store.access.downloads`); opening it re-checks the key, the buyer, the
    sign-in and the feeds now. Counted against the rate limit per sign-in; a bad
    ticket per client address, like a bad link token."""

    #: The file's name once the ticket's filters are read: after them (issue 45 item 10).
    download_name: str | None = None

    def set_default_headers(self) -> None:
        super().set_default_headers()
        name = self.download_name or f"lineups-{utcnow():%Y%m%d}.csv"
        self.set_header("Content-Disposition", f'attachment; filename="{name}"')

    def _select(self, session: Session, ticket: str, address: str, counted: bool) -> Export:
        try:
            opened = downloads.open_ticket(session, ticket, self.deps.settings.signing_secrets())
        except Unauthorized:
            self._limit(f"addr:{address}")
            raise
        self._limit(f"signin:{opened.sign_in_id}")
        query, _, _ = parse_query(opened.args, default_taxonomy().parse_filter)
        self.download_name = file_name(query, utcnow().date())
        feeds = visible_feeds(session, opened.buyer_id, query.source)
        session.commit()  # checked on the primary; the rows may come from a replica
        return Export(f"download:{opened.sign_in_id}", opened.buyer_id, query, feeds)
