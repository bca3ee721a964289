"""Share-link commands of C11: `lineups link create | list | revoke` (C8)."""

from __future__ import annotations

import click

from cli.main import common, lineups, table
from store import accounts, links
from store.db import transaction


@lineups.group()
def link() -> None:
    """Share links: signed CSV URLs that spreadsheets import."""


@link.command("create")
@click.argument("buyer_ident", metavar="BUYER")
@click.argument("query", required=False, default="")
@click.option("--base-url", metavar="URL", default=None, help="Public address of the service (default $LINEUPS_BASE_URL).")
@common
def link_create(ctx, buyer_ident, query):
    """Create a link for BUYER freezing QUERY (as in a URL: port=NLRTM&commodity=Coal)."""
    secrets = ctx.settings.signing_secrets()
    with transaction(ctx.sessions) as session:
        buyer = accounts.find_buyer(session, buyer_ident)
        row, token = links.create_link(session, buyer, links.parse_query_string(query), secrets)
        url = links.url_for(ctx.settings.base_url, token)
        payload = {"id": row.id, "url": url, "filters": row.filters}
    ctx.emit(payload, f"Share link {payload['id']}:\n{url}\nTreat it like a password: anyone with it sees the data.")


@link.command("list")
@click.argument("buyer_ident", metavar="BUYER")
@click.option("--show-tokens", is_flag=True, help="Also print each link's URL (it holds the token).")
@click.option("--base-url", metavar="URL", default=None, help="Public address of the service (default $LINEUPS_BASE_URL).")
@common
def link_list(ctx, buyer_ident, show_tokens):
    """List a buyer's links: filters, created, last used, use count, revoked."""
    with transaction(ctx.sessions) as session:
        buyer = accounts.find_buyer(session, buyer_ident)
        secrets = ctx.settings.signing_secrets() if show_tokens else ()
        rows = [
            links.link_dict(row, links.url_for(ctx.settings.base_url, links.token_for(row, secrets)) if show_tokens else None)
            for row in links.list_links(session, buyer.id)
        ]
    columns = ["id", "query", "created_at", "last_used_at", "use_count", "revoked_at"] + (["url"] if show_tokens else [])
    ctx.emit({"links": rows}, lambda: table(rows, columns))


@link.command("revoke")
@click.argument("link_ident", metavar="LINK")
@common
def link_revoke(ctx, link_ident):
    """Revoke a link at once."""
    with transaction(ctx.sessions) as session:
        row = links.revoke_link(session, links.find_link(session, link_ident))
        payload = {"id": row.id, "revoked_at": links.link_dict(row)["revoked_at"]}
    ctx.emit(payload, f"Revoked share link {payload['id']} at {payload['revoked_at']}")
