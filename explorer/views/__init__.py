"""The explorer's screens, one `pn.viewable.Viewer` each, and the app that composes
them."""

from explorer.views.explorer import Explorer
from explorer.views.feeds import FeedsView
from explorer.views.lineups import LineupsView
from explorer.views.shares import SharesView

__all__ = ["Explorer", "FeedsView", "LineupsView", "SharesView"]
