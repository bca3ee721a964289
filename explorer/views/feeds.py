"""The feeds screen: the buyer's subscribed feeds with their ports, ratings,
subscription status and the coverage of every field (C7)."""

from __future__ import annotations

import pandas as pd
import panel as pn
import param
from bokeh.models import FactorRange
from panel.viewable import Viewer

from explorer.charts import bar_chart
from explorer.feeds import FeedsModel

RATINGS = (("coverage_rating", "Coverage"), ("commodity_rating", "Commodity"), ("commercial_rating", "Commercial"))


def stars(rating: float | None) -> str:
    """A 0–5 rating as five stars and its number."""
    if rating is None:
        return "not rated"
    full = int(round(rating))
    return "★" * full + "☆" * (5 - full) + f" {rating:g}/5"


def coverage_chart(frame: pd.DataFrame, feed: str):
    """Horizontal bars: the share of the feed's records that fill each field."""
    data = frame[frame["feed"] == feed]
    fields = [str(field) for field in data["field"]][::-1]  # the first field on top
    chart = bar_chart(
        "Field coverage (% of records)", 14 * len(fields) + 80, y_range=FactorRange(factors=fields),
        x_range=(0, 100), x_axis_label="%",
    )
    percent = (data["coverage"].astype(float) * 100).round(1)
    chart.hbar(y=fields, right=percent.tolist()[::-1], height=0.8, color="#2f6f9f", line_color="black")
    return chart


def feed_card(feed: dict, coverage: pd.DataFrame) -> pn.Card:
    ports = ", ".join(f"{p['name']} ({p['unlocode']}, {p['country_name']})" for p in feed["ports"])
    ratings = " · ".join(f"{label}: {stars(feed.get(key))}" for key, label in RATINGS)
    status = feed["subscription_status"]
    color = "#2e7d32" if status == "active" else "#b26a00"
    badge = f'<span style="color:#fff;background:{color};padding:1px 8px;border-radius:9px">{status}</span>'
    facts = pn.pane.Markdown(
        f"**Subscription:** {badge}  \n"
        f"**Ports:** {ports}  \n"
        f"**Updates:** {feed.get('frequency') or 'not stated'} · **Type:** {feed.get('feed_type') or 'not stated'}  \n"
        f"**Ratings:** {ratings}  \n"
        f"**Records:** {feed['record_count']:,}",
        sizing_mode="stretch_width",
    )
    return pn.Card(
        facts,
        pn.pane.Bokeh(coverage_chart(coverage, feed["name"]), sizing_mode="stretch_width"),
        title=f"{feed['name']} — {status}",
        sizing_mode="stretch_width", collapsed=False, css_classes=["feed-card"],
    )


class FeedsView(Viewer):
    """The subscribed feeds, one card each."""

    model = param.ClassSelector(class_=FeedsModel, constant=True)

    @param.depends("model.feeds")
    def _cards(self):
        if not self.model.feeds:
            return pn.pane.Markdown("You have no active or trial subscription.")
        coverage = self.model.coverage()
        return pn.GridBox(*(feed_card(f, coverage) for f in self.model.feeds), ncols=2, sizing_mode="stretch_width")

    def __panel__(self):
        return pn.Column(
            pn.Row("## Your feeds", pn.widgets.Button.from_param(self.model.param.refresh, width=100, margin=(20, 10))),
            self._cards,
            sizing_mode="stretch_width",
        )
