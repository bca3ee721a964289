"""The lineups screen: filters, the table, the charts, the download and row detail."""

from __future__ import annotations

import datetime as dt
import html

import panel as pn
import param
from panel.viewable import Viewer

from explorer import charts
from explorer.filters import today
from explorer.markup import md
from explorer.state import COLUMN_TITLES, LineupsModel
from explorer.views.detail import detail_view
from explorer.views.widgets import CommodityPicker, DateInput

WIDTH = 250
FILTER_WIDGETS = {
    "source": {"css_classes": ["filter-source"], "type": pn.widgets.Select, "name": "Feed", "width": WIDTH},
    "port": {"css_classes": ["filter-port"], "type": pn.widgets.Select, "name": "Port", "width": WIDTH},
    "country": {"css_classes": ["filter-country"], "type": pn.widgets.Select, "name": "Country", "width": WIDTH},
    "port_name": {
        "css_classes": ["filter-port_name"], "type": pn.widgets.TextInput, "name": "Port name contains",
        "placeholder": "e.g. Santos", "width": WIDTH,
    },
    "date_from": {
        "css_classes": ["filter-date_from"], "type": DateInput, "name": "From (UTC)", "placeholder": "YYYY-MM-DD",
        "width": WIDTH,
    },
    "date_to": {
        "css_classes": ["filter-date_to"], "type": DateInput, "name": "To (UTC)", "placeholder": "YYYY-MM-DD",
        "width": WIDTH,
    },
    "latest": {"css_classes": ["filter-latest"], "type": pn.widgets.Checkbox, "name": "Latest call per vessel only", "width": WIDTH},
    "merge": {"css_classes": ["filter-merge"], "type": pn.widgets.RadioButtonGroup, "name": "Rows", "color": "default", "width": WIDTH},
}
#: Date presets: label → (first day, last day) as days from today (None: open).
PRESETS = {"From today": (0, None), "Next 7 days": (0, 6), "Next 30 days": (0, 29), "Any date": (None, None)}
#: Below 1,000 px: the filters are a drawer over the page (shown when open), the
#: main part full width.
SCREEN_CSS = """
@media (max-width: 1000px) {
  :host(:not(.filters-open)) .sidebar { display: none !important; }
  .sidebar { position: absolute !important; left: 0; top: 48px; z-index: 20; background: #fff;
             box-shadow: 2px 4px 14px rgba(0, 0, 0, .25); padding-bottom: 10px; }
}
"""
MAIN_CSS = """
@media (min-width: 1001px) { .filters-toggle { display: none !important; } }
"""
#: The four vessel statuses in two columns.
STATUS_CSS = ".bk-input-group { display: grid !important; grid-template-columns: 1fr 1fr; }"
TABLE_CSS = """
.tabulator-row.tabulator-selected .tabulator-cell { background: #d6e6f7; }
.tabulator-row:focus { outline: 2px solid #0b5cab; outline-offset: -2px; }
.tabulator-cell { white-space: normal; }
"""
DOWNLOAD_LABEL = "Download CSV (all rows, by date)"
#: The download link drawn as the primary button it replaces.
DOWNLOAD_CSS = """
.download-csv { display: inline-block; box-sizing: border-box; width: 220px; padding: 6px 12px; text-align: center;
                font: inherit; border-radius: 4px; text-decoration: none; color: #fff; background: #0072b5; }
.download-csv:hover { background: #005b91; }
.download-csv:focus { outline: 2px solid #0b5cab; outline-offset: 2px; }
.download-csv.disabled { background: #b8c2cc; cursor: not-allowed; }
"""


def _table_height(rows) -> int:
    """As tall as the page needs, at most 560 px (then the table scrolls)."""
    return max(120, min(560, 40 + 34 * (0 if rows is None else len(rows))))


class LineupsView(Viewer):
    """Filter, look at, download and inspect the buyer's merged lineups."""

    model = param.ClassSelector(class_=LineupsModel, constant=True)
    reset = param.Event(label="Reset filters", doc="Every filter back to the first view's (upcoming calls).")
    filters_open = param.Boolean(default=False, label="☰ Filters", doc="""
        Below 1,000 px the filters are a drawer: whether it is open.""")

    def __init__(self, **params):
        super().__init__(**params)
        self._make_filters()
        self._make_table()
        self._make_charts()
        self._download = pn.pane.HTML(self._download_link, width=220, stylesheets=[DOWNLOAD_CSS])
        if pn.state.curdoc is not None:
            # Changes made before the page's websocket opened may not reach it.
            pn.state.onload(self._show_busy)

    def _make_filters(self) -> None:
        filters = self.model.filters
        names = list(FILTER_WIDGETS)
        self._filters = pn.Param(
            filters.param, parameters=names[: names.index("date_to") + 1], widgets=FILTER_WIDGETS, show_name=False,
            width=WIDTH + 20, css_classes=["lineup-filters"],
        )
        self._commodity = CommodityPicker(options=dict(filters.param.commodity.names), value=list(filters.commodity))
        self._commodity.param.watch(lambda event: setattr(filters, "commodity", list(event.new)), "value")
        filters.param.watch(lambda event: setattr(self._commodity, "value", list(event.new)), "commodity")
        self._options = pn.Param(
            filters.param, parameters=names[names.index("date_to") + 1 :], widgets=FILTER_WIDGETS, show_name=False,
            width=WIDTH + 20, css_classes=["lineup-options"],
        )
        self._vessel_status = pn.Column(
            pn.pane.Markdown("Vessel status (none ticked: any)", margin=(0, 10)),
            pn.widgets.CheckBoxGroup.from_param(
                filters.param.status, width=WIDTH, css_classes=["filter-status"], stylesheets=[STATUS_CSS],
            ),
            width=WIDTH + 20,
        )
        self._presets = pn.GridBox(
            *(self._preset_button(label) for label in PRESETS), ncols=2, width=WIDTH + 20, css_classes=["date-presets"],
        )

    def _make_table(self) -> None:
        model = self.model
        self._table = pn.widgets.Tabulator(
            model.table, pagination=None, sortable=False, selectable=1, disabled=True, show_index=False,
            hidden_columns=["id"], titles=COLUMN_TITLES, frozen_columns=["vessel"], layout="fit_columns",
            # Widths that fit 1,400 px; narrower screens scroll sideways, Vessel kept in view.
            widths={"vessel": 160, "port": 140, "commodity": 145, "qty": 100, "eta": 95, "etb": 95, "etd": 95,
                    "status": 80, "feeds": 155},
            sizing_mode="stretch_width", css_classes=["lineups-table"], stylesheets=[TABLE_CSS],
            height=model.param.page_rows.rx.pipe(_table_height),
            # Text wraps (a time: its day above its hour), so that the default columns fit 1,400 px.
            formatters={name: {"type": "textarea"} for name in ("vessel", "feeds", "port", "commodity", "eta", "etb", "etd")},
            # A page is 50 rows: draw them all (no virtual rows), so each row can take focus.
            configuration={"renderVertical": "basic", "columnDefaults": {"minWidth": 80}},
        )
        self._table.param.watch(self._select, "selection")
        self._count = pn.pane.Markdown(self._count_text, css_classes=["row-count"], margin=(5, 10))
        self._error = pn.pane.Alert(
            model.param.error.rx.pipe(md), alert_type="danger", visible=model.param.error.rx.bool(), css_classes=["query-error"],
        )
        self._pager = pn.Row(
            pn.widgets.Button.from_param(
                model.param.previous_page, width=100, css_classes=["previous-page"], disabled=model.param.page.rx.not_(),
            ),
            pn.pane.Markdown(model.range_text, css_classes=["page-range"], margin=(12, 10)),
            pn.widgets.Button.from_param(
                model.param.next_page, width=100, css_classes=["next-page"], disabled=model.on_last_page,
            ),
            pn.layout.HSpacer(),
            pn.widgets.Select.from_param(model.param.sort_by, width=230, css_classes=["sort-by"]),
            pn.widgets.Checkbox.from_param(model.param.descending, margin=(32, 10, 0, 10), css_classes=["sort-descending"]),
            sizing_mode="stretch_width", css_classes=["pager"],
        )
        self._order_note = pn.pane.Markdown(model.order_note, css_classes=["order-note"], margin=(0, 10))
        self._columns = pn.Card(
            pn.widgets.CheckBoxGroup.from_param(model.param.columns, inline=True, css_classes=["column-chooser"]),
            title="Columns", collapsed=True, sizing_mode="stretch_width", css_classes=["columns-card"],
        )

    def _make_charts(self) -> None:
        """The two charts, made once and redrawn in place (plain Bokeh: cheap), one
        under the other at every width: each as wide as the table, never squeezed.
        They join the page with their first totals, after the rows: placed with the
        table, two empty figures cost the browser ~0.35 s more before the first rows
        showed (2026-11-29, alternating cold sign-ins)."""
        groups = [*self.model.account.context.taxonomy.groups(), charts.UNRESOLVED]
        self._weekly = charts.weekly_quantity_chart(groups, css_classes=["weekly-chart"])
        self._status = charts.status_by_port_chart(css_classes=["status-chart"])
        charts.on_bar_click(self._weekly, self._week_clicked)
        charts.on_bar_click(self._status, self._port_clicked)
        self._drawn_charts = [
            pn.Column(
                pn.pane.Bokeh(self._weekly, sizing_mode="stretch_width"),
                pn.pane.Markdown(self._left_out_text, css_classes=["chart-note"]),
                sizing_mode="stretch_width", css_classes=["weekly-box"],
            ),
            pn.Column(pn.pane.Bokeh(self._status, sizing_mode="stretch_width"), sizing_mode="stretch_width", css_classes=["status-box"]),
        ]
        self._charts = pn.Column(
            pn.pane.Markdown("*Charts follow the rows…*", css_classes=["charts-pending"]),
            sizing_mode="stretch_width", css_classes=["charts"],
            # No blank chart frames under "No lineups match" (issue 45 item 10).
            visible=self.model.param.row_count.rx() > 0,
        )
        self._redraw()

    def _preset_button(self, label: str) -> pn.widgets.Button:
        button = pn.widgets.Button(label=label, color="light", width=120, margin=(2, 5), css_classes=["preset"])
        button.on_click(lambda _event: self._apply_preset(label))
        return button

    def _apply_preset(self, label: str) -> None:
        start, end = PRESETS[label]
        day = today()
        self.model.filters.param.update(
            date_from=None if start is None else day + dt.timedelta(days=start),
            date_to=None if end is None else day + dt.timedelta(days=end),
        )

    @param.depends("reset", watch=True)
    def _reset(self) -> None:
        self.model.filters.reset(today())

    def _select(self, event) -> None:
        self.model.select_row(event.new[0] if event.new else None)

    def _week_clicked(self, week: str) -> None:
        monday = dt.date.fromisoformat(week)
        self.model.filters.param.update(date_from=monday, date_to=monday + dt.timedelta(days=6))

    def _port_clicked(self, port: str) -> None:
        code = port.rsplit("(", 1)[-1].rstrip(")")
        if code in self.model.filters.param.port.objects.values():
            self.model.filters.port = code

    @param.depends("model.described", "model.row_count", "model.error", "model.busy", "model.duplicates")
    def _count_text(self) -> str:
        model = self.model
        if model.error:
            return ""
        if model.busy and not model.described:
            return "*Loading your lineups…*"
        count = model.row_count
        if not count:
            return (
                f"**No lineups match** · {md(model.described)}  \n"
                "Try a wider date range, another port or commodity, or *Reset filters*."
            )
        flagged = len(model.duplicates)
        rows = "1 row on this page looks" if flagged == 1 else f"{flagged:,} rows on this page look"
        note = f" · ⚠ {rows} like a duplicate of another row (click one to see why)" if flagged else ""
        loading = " · *updating…*" if model.busy else ""
        return f"**{count:,} row{'s' if count != 1 else ''}** · {md(model.described)}{note}{loading}"

    @param.depends("model.left_out", "model.charting", "model.charts_problem")
    def _left_out_text(self) -> str:
        model = self.model
        if model.charts_problem:
            return f"**{md(model.charts_problem)}**"
        if model.charting:
            return "*Charts updating…*"
        left = model.left_out
        if not left:
            return ""
        parts = ", ".join(f"{n:,} in {'barrels' if unit == 'BBL' else md(unit)}" for unit, n in left.items())
        return f"Not in this chart (not in tonnes): {parts}."

    @param.depends("model.busy", watch=True)
    def _busy(self) -> None:
        # On the loop's next turn, under the document lock, as the model is then:
        # changes made from the reading coroutine could otherwise reach the page out
        # of order and leave it looking busy.
        pn.state.execute(self._show_busy, schedule=True)

    def _show_busy(self) -> None:
        # The table's spinner only: the charts are Bokeh figures, which Panel's
        # `loading` would change outside the document lock; the count line says
        # "updating…" meanwhile.
        self._table.loading = self.model.busy

    @param.depends("model.weekly", "model.statuses", watch=True)
    def _draw(self) -> None:
        # Bokeh models, not Panel's: changed under the document's lock.
        pn.state.execute(self._redraw, schedule=True)

    def _redraw(self) -> None:
        model = self.model
        if not hasattr(self, "_charts"):  # the result came before the charts were made
            return
        if model.weekly is not None:
            charts.draw_weekly_quantity(self._weekly, model.weekly)
        if model.statuses is not None:
            charts.draw_status_by_port(self._status, model.statuses)
        if self._drawn_charts and model.weekly is not None and model.statuses is not None:
            self._charts.objects, self._drawn_charts = self._drawn_charts, []  # the first totals: on the page now

    @param.depends("model.download_path")
    def _download_link(self) -> str:
        """The download as a link to the explorer's download of the current filters
        (an HTTP download the API streams; issue 49 item 5), or the label alone
        while the filters select nothing."""
        path = self.model.download_path
        if not path:
            return f'<span class="download-csv disabled">{DOWNLOAD_LABEL}</span>'
        return f'<a class="download-csv" href="{html.escape(path, quote=True)}" download>{DOWNLOAD_LABEL}</a>'

    @param.depends("model.detail")
    def _detail(self):
        return detail_view(self.model.detail)

    def __panel__(self):
        sidebar = pn.Column(
            "### Filters", self._filters, self._presets, self._commodity, self._vessel_status, self._options,
            pn.widgets.Button.from_param(self.param.reset, color="default", width=WIDTH, css_classes=["reset-filters"]),
            self._download, width=WIDTH + 30, css_classes=["sidebar"],
        )
        toggle = pn.widgets.Toggle.from_param(self.param.filters_open, width=120, css_classes=["filters-toggle"])
        main = pn.Column(
            toggle, self._error, self._count, self._pager, self._order_note, self._table, self._columns, self._detail, self._charts,
            sizing_mode="stretch_width", css_classes=["lineups-main"], stylesheets=[MAIN_CSS],
            styles={"flex": "1 1 auto", "min-width": "0"},
        )
        opened = self.param.filters_open.rx.where(["lineups-screen", "filters-open"], ["lineups-screen"])
        return pn.FlexBox(
            sidebar, main, flex_wrap="nowrap", sizing_mode="stretch_width", css_classes=opened,
            styles={"align-items": "flex-start"}, stylesheets=[SCREEN_CSS],
        )
