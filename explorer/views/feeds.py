"""The feeds screen: the buyer's subscribed feeds with their ports, ratings,
subscription status and the coverage of every field (C7)."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import panel as pn
import param
from bokeh.models import FactorRange, HoverTool
from panel.viewable import Viewer

from explorer.charts import bar_chart
from explorer.feeds import FeedsModel
from explorer.markup import html_text, md
from explorer.views.detail import field_label

#: Fields a feed does not report (the service makes them), left out of coverage.
NOT_REPORTED = {"id", "source_id", "source_name", "created_at", "updated_at", "combined_date",
                "commodity_normalized", "commodity_normalized_group", "commodity_normalized_subgroup"}

RATINGS = (("coverage_rating", "Coverage"), ("commodity_rating", "Commodity"), ("commercial_rating", "Commercial"))


def stars(rating: float | None) -> str:
    """A 0–5 rating as five stars and its number."""
    if rating is None:
        return "not rated"
    full = int(round(rating))
    return "★" * full + "☆" * (5 - full) + f" {rating:g}/5"


def coverage_chart(frame: pd.DataFrame, feed: str):
    """Horizontal bars: the share of the feed's records that fill each field."""
    data = frame[(frame["feed"] == feed) & ~frame["field"].isin(NOT_REPORTED)]
    fields = [field_label(str(field)) for field in data["field"]][::-1]  # the first field on top
    chart = bar_chart(
        "Fields filled (% of records)", 14 * len(fields) + 80, y_range=FactorRange(factors=fields),
        x_range=(0, 100), x_axis_label="%",
    )
    percent = (data["coverage"].astype(float) * 100).round(1)
    chart.hbar(y=fields, right=percent.tolist()[::-1], height=0.8, color="#2f6f9f", line_color="black")
    chart.add_tools(HoverTool(tooltips=[("Field", "@y"), ("Records filling it", "@right{0.0}%")]))
    return chart


def freshness(updated_at: str | None, now: dt.datetime | None = None) -> str:
    """"Last record received 3 hours ago (2026-11-24 19:02 UTC)"."""
    if not updated_at:
        return "No records received yet"
    when = dt.datetime.fromisoformat(updated_at.replace("Z", "+00:00"))
    now = now or dt.datetime.now(dt.timezone.utc)
    minutes = max(0, int((now - when).total_seconds() // 60))
    if minutes < 60:
        ago = "just now" if minutes < 2 else f"{minutes} minutes ago"
    elif minutes < 48 * 60:
        ago = f"{minutes // 60} hour{'s' if minutes // 60 != 1 else ''} ago"
    else:
        ago = f"{minutes // 1440} days ago"
    return f"Last record received {ago} ({when:%Y-%m-%d %H:%M} UTC)"


def feed_card(feed: dict, coverage: pd.DataFrame) -> pn.Card:
    ports = ", ".join(f"{md(p['name'])} ({md(p['unlocode'])}, {md(p['country_name'])})" for p in feed["ports"])
    ratings = " · ".join(f"{label}: {stars(feed.get(key))}" for key, label in RATINGS)
    status = feed["subscription_status"]
    color = "#2e7d32" if status == "active" else "#b26a00"
    badge = f'<span style="color:#fff;background:{color};padding:1px 8px;border-radius:9px">{html_text(status)}</span>'
    facts = pn.pane.Markdown(
        f"**Subscription:** {badge}  \n"
        f"**Ports:** {ports}  \n"
        f"**Updates:** {md(feed.get('frequency') or 'not stated')} · **Type:** {md(feed.get('feed_type') or 'not stated')}  \n"
        f"**Ratings:** {ratings}  \n"
        f"**Records:** {feed['record_count']:,} · **{freshness(feed.get('updated_at'))}**",
        sizing_mode="stretch_width",
    )
    return pn.Card(
        facts,
        pn.pane.Bokeh(coverage_chart(coverage, feed["name"]), sizing_mode="stretch_width"),
        title=f"{html_text(feed['name'])} — {html_text(status)}",
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
