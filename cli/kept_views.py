"""The merged views kept for buyers, after a command changed what a buyer may see
(issues 15, 47): the demo's views built at once (`keep_views`); a subscription
change's or a resume's switched at once when no view is missing, else built with
`--wait` or left to the builder (`after_change`)."""

from __future__ import annotations

from store.access import accounts
from store.database.db import transaction
from store.views import builder, builds


def keep_views(ctx, buyer_id: str) -> None:
    """After the demo data set is loaded: build the buyer's merged views, so that
    their first page is read, not merged, and drop views that no buyer reads
    (issue 15). A suspended buyer reads nothing: their views wait for `buyer resume`."""
    with transaction(ctx.sessions) as session:
        active = accounts.find_buyer(session, buyer_id).status == "active"
    if active:
        builds.ensure_buyer(ctx.sessions, buyer_id)
    with transaction(ctx.sessions) as session:
        builds.prune(session)


WAIT_HELP = "Wait until the buyer's view is ready and they read their new feeds (building it here if no one is)."


def after_change(ctx, buyer_id: str, switched: bool, wait: bool) -> bool:
    """After a committed change of what the buyer wants (`switched`: in effect
    already): with `wait`, build their view here and switch them; then drop the views
    no one reads. Returns whether the change is in effect."""
    if wait and not switched:
        switched = builder.settle(ctx.sessions, buyer_id)
    with transaction(ctx.sessions) as session:
        builds.prune(session)
    return switched


def pending_note(switched: bool, removes_access: bool) -> str:
    if switched:
        return "in effect"
    if removes_access:
        return ("in effect at once; the view of the feeds they keep is built by `lineups serve` or "
                "`lineups views build`, or by their next read")
    return ("waiting for its view: they read their previous feeds until `lineups serve` or "
            "`lineups views build` has built it")
