"""The lineups screen: filters, the table, the charts, the download and row detail."""

from __future__ import annotations

import datetime as dt

import panel as pn
import param
from panel.viewable import Viewer

from explorer import charts
from explorer.state import TABLE_TITLES, LineupsModel
from explorer.views.detail import detail_view

WIDTH = 250
FILTER_WIDGETS = {
    "source": {"css_classes": ["filter-source"], "type": pn.widgets.Select, "name": "Feed", "width": WIDTH},
    "port": {"css_classes": ["filter-port"], "type": pn.widgets.Select, "name": "Port", "width": WIDTH},
    "country": {"css_classes": ["filter-country"], "type": pn.widgets.Select, "name": "Country", "width": WIDTH},
    "port_name": {"css_classes": ["filter-port_name"], "type": pn.widgets.TextInput, "name": "Port name contains", "placeholder": "e.g. Santos", "width": WIDTH},
    "date_from": {"css_classes": ["filter-date_from"], "type": pn.widgets.DatePicker, "name": "From (UTC)", "width": WIDTH},
    "date_to": {"css_classes": ["filter-date_to"], "type": pn.widgets.DatePicker, "name": "To (UTC)", "width": WIDTH},
    "commodity": {
        "css_classes": ["filter-commodity"], "type": pn.widgets.MultiChoice, "name": "Commodity", "placeholder": "Any commodity",
        "search_option_limit": 40, "width": WIDTH,
    },
    "latest": {"css_classes": ["filter-latest"], "type": pn.widgets.Checkbox, "name": "Latest call per vessel only", "width": WIDTH},
    "merge": {"css_classes": ["filter-merge"], "type": pn.widgets.RadioButtonGroup, "name": "Rows", "color": "default", "width": WIDTH},
}
PAGE_SIZE = 50


class LineupsView(Viewer):
    """Filter, look at, download and inspect the buyer's merged lineups."""

    model = param.ClassSelector(class_=LineupsModel, constant=True)

    def __init__(self, **params):
        super().__init__(**params)
        self._filters = pn.Param(
            self.model.filters.param, widgets=FILTER_WIDGETS, show_name=False, width=WIDTH + 20,
            css_classes=["lineup-filters"],
        )
        self._table = pn.widgets.Tabulator(
            self.model.table, pagination="remote", page_size=PAGE_SIZE, sortable=True,
            selectable=1, disabled=True, show_index=False, hidden_columns=["id"],
            formatters={"quantity": {"type": "money", "precision": 0, "thousand": ","}},
            titles=TABLE_TITLES, layout="fit_data_table", sizing_mode="stretch_width",
            height=560, css_classes=["lineups-table"],
        )
        self._table.param.watch(self._select, "selection")
        # Panes bound to the model update in place rather than being rebuilt.
        self._count = pn.pane.Markdown(self._count_text, css_classes=["row-count"], margin=(5, 10))
        self._error = pn.pane.Alert(
            self.model.param.error, alert_type="danger", visible=self.model.param.error.rx.bool(),
            css_classes=["query-error"],
        )
        # Made once and redrawn in place when the selection changes. They are in the
        # first page: as plain Bokeh they cost little to make, and drawn after the
        # page (Panel's `defer_load`) they reached the browser while it was still
        # drawing the table, whose rows then showed later.
        groups = [*self.model.account.context.taxonomy.groups(), charts.UNRESOLVED]
        self._weekly = charts.weekly_quantity_chart(groups, css_classes=["weekly-chart"])
        self._status = charts.status_by_port_chart(css_classes=["status-chart"])
        self._draw_charts()
        self._charts = pn.Row(
            pn.pane.Bokeh(self._weekly), pn.pane.Bokeh(self._status),
            sizing_mode="stretch_width", css_classes=["charts"],
        )
        self._download = pn.widgets.FileDownload(
            callback=self.model.csv_file, filename=f"lineups-{dt.date.today():%Y%m%d}.csv",
            label="Download CSV (all rows)", color="primary", embed=False, width=220,
        )

    def _select(self, event) -> None:
        self.model.select_row(event.new[0] if event.new else None)

    @param.depends("model.selection", "model.row_count")
    def _count_text(self) -> str:
        count = self.model.row_count
        return f"**{count:,} row{'s' if count != 1 else ''}** · {self.model.summary()}"

    @param.depends("model.selection", watch=True)
    def _draw_charts(self) -> None:
        charts.draw_weekly_quantity(self._weekly, self.model.weekly_quantity())
        charts.draw_status_by_port(self._status, self.model.status_by_port())

    @param.depends("model.detail")
    def _detail(self):
        return detail_view(self.model.detail)

    def __panel__(self):
        sidebar = pn.Column(
            "### Filters", self._filters, self._download, width=WIDTH + 30, css_classes=["sidebar"],
        )
        main = pn.Column(
            self._error, self._count, self._table, self._detail, self._charts, sizing_mode="stretch_width",
        )
        return pn.Row(sidebar, main, sizing_mode="stretch_width")
