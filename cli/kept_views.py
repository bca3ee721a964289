"""The merged views kept for a buyer, brought up to date after a command changed what
the buyer may see (issue 15)."""

from __future__ import annotations

from store.access import accounts
from store.database.db import transaction
from store.views import builds


def keep_views(ctx, buyer_id: str) -> None:
    """After a change of what a buyer may see (committed): bring the buyer's merged
    views up to date (built already before a subscription change or a resume; an
    ingest may have committed since), so that their next page is read, not merged, and
    drop views that no buyer has read for the retention period (issue 15). A suspended
    buyer reads nothing: their views wait for `buyer resume`."""
    with transaction(ctx.sessions) as session:
        active = accounts.find_buyer(session, buyer_id).status == "active"
    if active:
        builds.ensure_buyer(ctx.sessions, buyer_id)
    with transaction(ctx.sessions) as session:
        builds.prune(session)
