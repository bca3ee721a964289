"""The lineups view's charts: the frames they show (pure functions of the result's
totals, which the store computes in SQL: `store.views.lineups.Summary`) and the Bokeh
figures drawn from them.

- Quantity by commodity group per week: the sum of `quantity` of the rows measured
  in tonnes (`MT`), by the week (Monday, UTC) of their `combined_date`, stacked by
  commodity group. Barrels and units do not add up with tonnes, so they are left
  out, and the chart says so.
- Vessels by status per port: distinct vessels per port and vessel status.

The figures are plain Bokeh, made once per session, each one glyph whose source
holds every bar (start and end of its stacked segment, colour); `draw_*` replaces
that data in place. Drawing them through hvPlot/HoloViews took ~0.3 s of CPU a
chart at every filter change; swapping a ColumnDataSource's
data takes a few milliseconds.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import pandas as pd
from bokeh.core.properties import field
from bokeh.models import ColumnDataSource, FactorRange, HoverTool, Legend, LegendItem, NumeralTickFormatter, TapTool
from bokeh.plotting import figure

UNRESOLVED = "Unresolved"
NO_STATUS = "unknown"
STATUS_ORDER = ("expected", "anchored", "berthed", "departed", NO_STATUS)
STATUS_COLORS = {
    "expected": "#8fb8de", "anchored": "#f2b134", "berthed": "#2e8b57",
    "departed": "#7a7a7a", NO_STATUS: "#d0d0d0",
}
#: The colours of the commodity groups, in the taxonomy's order (HoloViews' default cycle).
GROUP_COLORS = (
    "#30a2da", "#fc4f30", "#e5ae38", "#6d904f", "#8b8b8b", "#17becf", "#9467bd", "#d62728",
    "#1f77b4", "#e377c2", "#8c564b", "#bcbd22",
)
#: The x or y factor of a chart without data.
NOTHING = "–"


def weekly_quantity(tonnes: pd.DataFrame) -> pd.DataFrame:
    """Columns week (Monday, text), group, kt (thousand tonnes), one row per pair, from
    `Summary.tonnes` (tonnes per day since the epoch and group, summed in SQL)."""
    if tonnes.empty:
        return pd.DataFrame({"week": pd.Series(dtype=object), "group": pd.Series(dtype=object), "kt": pd.Series(dtype=float)})
    days = pd.to_datetime(tonnes["day"].astype("int64"), unit="D")
    monday = days - pd.to_timedelta(days.dt.day_of_week, unit="D")
    frame = pd.DataFrame(
        {
            "week": monday.dt.strftime("%Y-%m-%d").astype(object),
            "group": tonnes["group"].astype(object).where(tonnes["group"].notna(), UNRESOLVED),
            "kt": pd.to_numeric(tonnes["tonnes"], errors="coerce").astype(float) / 1000.0,
        }
    )
    return frame.groupby(["week", "group"], as_index=False)["kt"].sum().sort_values(["week", "group"], ignore_index=True)


def left_out(units: Mapping[str | None, int]) -> dict[str, int]:
    """{unit: rows} of the rows with a quantity that the tonnes chart cannot add up
    (barrels, units…, or no unit), largest first, from `Summary.units`."""
    named = {("no unit" if unit is None else str(unit)): int(n) for unit, n in units.items() if n}
    return dict(sorted(named.items(), key=lambda item: (-item[1], item[0])))


def status_by_port(statuses: pd.DataFrame) -> pd.DataFrame:
    """Columns port (name and LOCODE), status, vessels: distinct vessels per pair, from
    `Summary.statuses` (counted in SQL)."""
    if statuses.empty:
        return pd.DataFrame({"port": pd.Series(dtype=object), "status": pd.Series(dtype=object), "vessels": pd.Series(dtype=int)})
    code = statuses["port_unlocode"].astype(str)
    name = statuses["port_name"].astype(object).where(statuses["port_name"].notna(), code)
    frame = pd.DataFrame(
        {
            "port": (name.astype(str) + " (" + code + ")").astype(object),
            "status": statuses["status"].astype(object).where(
                statuses["status"].notna(), NO_STATUS
            ),
            "vessels": statuses["vessels"].astype(int),
        }
    )
    counts = frame.groupby(["port", "status"], as_index=False)["vessels"].sum()
    order = {s: i for i, s in enumerate(STATUS_ORDER)}
    counts = counts.assign(_order=counts["status"].map(order).fillna(len(order)))
    return counts.sort_values(["port", "_order"], ignore_index=True).drop(columns="_order")


def bar_chart(title: str, height: int, **options) -> figure:
    """A figure as wide as its pane, without tools or grid lines, as hvPlot drew the
    explorer's charts; `options` go to Bokeh's `figure` (axes, ranges, CSS classes)."""
    chart = figure(
        title=title, height=height, sizing_mode="stretch_width", toolbar_location=None, tools="", **options,
    )
    chart.title.text_font_size = "12pt"
    chart.xgrid.visible = chart.ygrid.visible = False
    return chart


def _stacks(
    frame: pd.DataFrame, across: str, layer: str, value: str, layers: Sequence[str], colors: Mapping[str, str],
) -> dict:
    """The bars of a stacked chart as one glyph's columns: per bar its `across`
    factor, `layer`, start and end (stacked in the order of `layers` within each
    factor) and colour; ordered by layer, so that the legend lists the layers in
    that order."""
    order = {name: i for i, name in enumerate(layers)}
    bars = frame.assign(_order=frame[layer].map(order)).sort_values([across, "_order"], kind="stable")
    end = bars.groupby(across, sort=False)[value].cumsum().astype(float)
    bars = bars.assign(start=end - bars[value].astype(float), end=end).sort_values(["_order", across], kind="stable")
    return {
        across: bars[across].astype(str).tolist(),
        layer: bars[layer].astype(str).tolist(),
        "start": bars["start"].tolist(),
        "end": bars["end"].tolist(),
        "color": [colors[name] for name in bars[layer]],
        # What the hover shows: the bar's own amount (tonnes for the weekly chart).
        "value": (bars[value].astype(float) * (1000 if value == "kt" else 1)).round().tolist(),
    }


def _legend(chart: figure, renderer, layer: str, place: str, **options) -> None:
    """A legend entry per value of the source's `layer` column, drawn in the browser
    from the data, so that it follows every redraw."""
    chart.add_layout(Legend(items=[LegendItem(label=field(layer), renderers=[renderer])], **options), place)


def weekly_quantity_chart(groups: Sequence[str], **options) -> figure:
    """Stacked bars of thousand tonnes per week by commodity group, the groups
    stacked, coloured and listed in the order of `groups` (the taxonomy's groups and
    `UNRESOLVED`); empty until drawn."""
    chart = bar_chart(
        "Quantity by commodity group per week (kt, MT rows)", 380, x_range=FactorRange(factors=[NOTHING]),
        x_axis_label="Week starting (UTC)", y_axis_label="thousand tonnes", **options,
    )
    chart.tags = list(groups)  # the stacking order, which draw_weekly_quantity reads
    source = ColumnDataSource({"week": [], "group": [], "start": [], "end": [], "color": [], "value": []})
    bars = chart.vbar(
        x="week", bottom="start", top="end", width=0.8, color="color", line_color="black", source=source,
    )
    chart.y_range.start = 0
    chart.yaxis.formatter = NumeralTickFormatter(format="0,0")  # 12,000, never 1.2e+4 (issue 45 item 10)
    chart.xaxis.major_label_orientation = math.pi / 4
    chart.add_tools(HoverTool(renderers=[bars], tooltips=[
        ("Week starting", "@week"), ("Group", "@group"), ("Tonnes", "@value{0,0}"),
    ]))
    _legend(chart, bars, "group", "below", orientation="horizontal")
    return chart


def draw_weekly_quantity(chart: figure, frame: pd.DataFrame) -> None:
    """Show `weekly_quantity`'s frame in a chart of `weekly_quantity_chart`."""
    groups = [*chart.tags, *sorted(set(frame["group"]) - set(chart.tags))]
    colors = {group: GROUP_COLORS[i % len(GROUP_COLORS)] for i, group in enumerate(groups)}
    weeks = sorted(set(frame["week"]))
    chart.x_range.factors = weeks or [NOTHING]
    chart.renderers[0].data_source.data = _stacks(frame, "week", "group", "kt", groups, colors)


def status_by_port_chart(**options) -> figure:
    """Horizontal stacked bars of vessels per port by vessel status; empty until drawn."""
    chart = bar_chart(
        "Vessels by status per port", 240, y_range=FactorRange(factors=[NOTHING]), x_axis_label="vessels",
        **options,
    )
    source = ColumnDataSource({"port": [], "status": [], "start": [], "end": [], "color": [], "value": []})
    bars = chart.hbar(
        y="port", left="start", right="end", height=0.8, color="color", line_color="black", source=source,
    )
    chart.x_range.start = 0
    chart.xaxis.formatter = NumeralTickFormatter(format="0,0")
    chart.add_tools(HoverTool(renderers=[bars], tooltips=[("Port", "@port"), ("Status", "@status"), ("Vessels", "@value{0,0}")]))
    _legend(chart, bars, "status", "right")
    return chart


def draw_status_by_port(chart: figure, frame: pd.DataFrame) -> None:
    """Show `status_by_port`'s frame in a chart of `status_by_port_chart`: a bar per
    port, the first port in name order on top, the chart as tall as its ports need."""
    ports = sorted(set(frame["port"]), reverse=True)
    chart.y_range.factors = ports or [NOTHING]
    chart.height = max(240, 28 * len(ports) + 90)
    chart.renderers[0].data_source.data = _stacks(frame, "port", "status", "vessels", STATUS_ORDER, STATUS_COLORS)


def on_bar_click(chart: figure, callback) -> None:
    """Call `callback(factor)` with the week or port of a bar the buyer clicks (the
    selection is cleared again, so the same bar can be clicked twice)."""
    chart.add_tools(TapTool())
    source = chart.renderers[0].data_source
    axis = "week" if "week" in source.data else "port"

    def clicked(_attr, _old, new) -> None:
        if new:
            factor = source.data[axis][new[0]]
            source.selected.indices = []
            callback(factor)

    source.selected.on_change("indices", clicked)
