"""Share-link commands of C11: `lineups link create | list | revoke` (C8)."""

from __future__ import annotations

import click

from cli.main import common, table
from store.access import accounts, links
from store.database.db import transaction


@click.group()
def link() -> None:
    """Share links: signed CSV URLs that spreadsheets import."""


@link.command("create")
@click.argument("buyer_ident", metavar="BUYER")
@click.argument("query", required=False, default="")
@click.option("--label", metavar="NAME", default=None, help="A name for the link, unique among the buyer's links; LINK arguments take it.")
@click.option("--base-url", metavar="URL", default=None, help="Public address of the service (default $LINEUPS_BASE_URL, else `lineups config get base-url`).")
@common
def link_create(ctx, buyer_ident, query, label):
    """Create a link for BUYER freezing QUERY (as in a URL: port=NLRTM&commodity=Coal)."""
    secrets = ctx.settings.signing_secrets()
    base_url = ctx.public_base_url()
    with transaction(ctx.sessions) as session:
        buyer = accounts.find_buyer(session, buyer_ident)
        row, token = links.create_link(session, buyer, links.parse_query_string(query), secrets, label)
        url = links.url_for(base_url, token)
        payload = {"id": row.id, "url": url, "filters": row.filters}
    ctx.emit(payload, f"Share link {payload['id']}:\n{url}\nTreat it like a password: anyone with it sees the data.")


@link.command("list")
@click.argument("buyer_ident", metavar="BUYER")
@click.option("--show-tokens", is_flag=True, help="Also print each link's URL (it holds the token).")
@click.option("--base-url", metavar="URL", default=None, help="Public address of the service (default $LINEUPS_BASE_URL, else `lineups config get base-url`).")
@common
def link_list(ctx, buyer_ident, show_tokens):
    """List a buyer's links: filters, created, last used, use count, revoked."""
    base_url = ctx.public_base_url() if show_tokens else ""
    with transaction(ctx.sessions) as session:
        buyer = accounts.find_buyer(session, buyer_ident)
        secrets = ctx.settings.signing_secrets() if show_tokens else ()
        rows = [
            links.link_dict(row, links.url_for(base_url, links.token_for(row, secrets)) if show_tokens else None)
            for row in links.list_links(session, buyer.id)
        ]
    columns = ["id", "label", "query", "created_at", "last_used_at", "use_count", "revoked_at"] + (["url"] if show_tokens else [])
    ctx.emit({"links": rows}, lambda: table(rows, columns))


@link.command("revoke")
@click.argument("link_ident", metavar="LINK")
@click.option("--buyer", "buyer_ident", metavar="BUYER", default=None,
              help="Whose link: labels are unique per buyer, so a label two buyers use needs it.")
@common
def link_revoke(ctx, link_ident, buyer_ident):
    """Revoke a link (its id, or its label) at once."""
    with transaction(ctx.sessions) as session:
        buyer_id = accounts.find_buyer(session, buyer_ident).id if buyer_ident else None
        row = links.revoke_link(session, links.find_link(session, link_ident, buyer_id, labelled=True))
        payload = {"id": row.id, "revoked_at": links.link_dict(row)["revoked_at"]}
    ctx.emit(payload, f"Revoked share link {payload['id']} at {payload['revoked_at']}")
