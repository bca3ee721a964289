"""The feeds screen's state (C7): the buyer's subscribed feeds with their ports,
ratings, subscription status, freshness (when its last record arrived) and the coverage of
every field, read from the store (on the explorer's threads) when the screen opens."""

from __future__ import annotations

import pandas as pd
import param

from explorer.session import Account, SessionLost, feed_list
from store.views.coverage import feed_schema
from store.intake.feeds import find_feed
from store.fields import RECORD_FIELDS


class FeedsModel(param.Parameterized):
    """The buyer's subscribed feeds with their ports, ratings, status and field
    coverage (C7)."""

    account = param.ClassSelector(class_=Account, constant=True, precedence=-1)
    feeds = param.List(default=[], item_type=dict, precedence=-1, doc="""
        C7 source dicts, each with `record_count` and `coverage` ({field: 0–1}).""")
    refresh = param.Event(label="Refresh", doc="Read the feeds from the store (first done when the screen opens).")

    @param.depends("refresh", watch=True)
    async def _load(self) -> None:
        try:
            feeds = await self.account.run(lambda session, buyer: _feeds(session, buyer.id))
        except SessionLost:
            return
        self.feeds = feeds

    @param.depends("feeds")
    def coverage(self) -> pd.DataFrame:
        """Columns feed, field, coverage (0–1): one row per feed and C1 field."""
        rows = [
            {"feed": feed["name"], "field": name, "coverage": feed["coverage"].get(name, 0.0)}
            for feed in self.feeds
            for name in RECORD_FIELDS
        ]
        return pd.DataFrame(rows, columns=["feed", "field", "coverage"])


def _feeds(session, buyer_id: str) -> list[dict]:
    """The buyer's feeds (C7) with their record count, coverage and freshness."""
    feeds = []
    for source in feed_list(session, buyer_id):
        schema = feed_schema(session, find_feed(session, source["id"]))
        coverage = {f["name"]: f["coverage"] for f in schema["fields"]}
        feeds.append(
            {**source, "record_count": schema["record_count"], "coverage": coverage,
             "updated_at": schema.get("updated_at"), "first_date": schema.get("first_date"),
             "last_date": schema.get("last_date")}
        )
    return feeds
