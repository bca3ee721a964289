"""The explorer's state: param classes for the lineup query and what it selects.

`LineupFilters` holds one /v1/lineups query: its widgets are made from its params,
`to_args()` gives exactly the API's query parameters, and `query()` validates them
with the API's own parser, so an invalid combination fails with the API's message.
`LineupsModel` holds what the store answered for the buyer: the selected rows, their
count, the error message, and the provenance of the row the buyer picked. Derived
data (the table, the chart frames) come from `@param.depends` methods; store work
happens only in `watch=True` methods, each through `Account.store()`.
"""

from __future__ import annotations

import io
from typing import Any

import pandas as pd
import param

from explorer import charts
from explorer.csvfile import csv_bytes
from explorer.session import Account, SessionLost
from explorer.words import describe_filters
from store import history
from store.errors import LineupsError
from store.fields import RECORD_FIELDS, format_time
from store.query import LineupQuery, parse_query

ALL = "all"
MERGE_MODES = {"Merge all feeds": "all", "One row per feed": "by_source"}
#: Columns of the table on screen (the download has all of C1).
TABLE_COLUMNS = (
    "id", "vessel_name", "vessel_imo", "port", "commodity", "operation", "quantity",
    "quantity_unit", "eta", "etb", "etd", "vessel_status", "source_name",
)
TABLE_TITLES = {
    "vessel_name": "Vessel", "vessel_imo": "IMO", "port": "Port", "commodity": "Commodity",
    "operation": "Operation", "quantity": "Quantity", "quantity_unit": "Unit", "eta": "ETA",
    "etb": "ETB", "etd": "ETD", "vessel_status": "Status", "source_name": "Feeds",
}


def empty_rows() -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(dtype=object) for name in RECORD_FIELDS})


class LineupFilters(param.Parameterized):
    """One /v1/lineups query, as widgets can edit it."""

    source = param.Selector(default=ALL, objects={"All my feeds": ALL}, doc="The feed, or all of the buyer's feeds.")
    port = param.Selector(default="", objects={"Any port": ""}, doc="A port of the buyer's feeds (UN/LOCODE).")
    country = param.Selector(default="", objects={"Any country": ""}, doc="The country of the port.")
    port_name = param.String(default="", doc="Part of the port's name.")
    date_from = param.CalendarDate(default=None, allow_None=True, label="From", doc="First day (UTC).")
    date_to = param.CalendarDate(default=None, allow_None=True, label="To", doc="Last day (UTC).")
    commodity = param.ListSelector(default=[], objects=[], doc="Commodity groups, subgroups or leaves.")
    latest = param.Boolean(default=False, label="Latest call per vessel only")
    merge = param.Selector(default=ALL, objects=MERGE_MODES, label="Merge")

    def __init__(self, feeds: list[dict[str, Any]] = (), commodities: list[str] = (), **params):
        super().__init__()
        ports = {p["unlocode"]: p for feed in feeds for p in feed["ports"]}
        self.param.source.objects = {"All my feeds": ALL, **{f["name"]: f["id"] for f in feeds}}
        self.param.port.objects = {
            "Any port": "",
            **{f"{p['name']} ({code})": code for code, p in sorted(ports.items(), key=lambda i: (i[1]["name"] or "", i[0]))},
        }
        countries = sorted({p["country_name"] for p in ports.values() if p["country_name"]})
        self.param.country.objects = {"Any country": "", **{c: c for c in countries}}
        self.param.commodity.objects = list(commodities)
        self.param.update(**params)

    def to_args(self) -> dict[str, list[str]]:
        """The query as /v1/lineups parameters (defaults left out)."""
        args: dict[str, list[str]] = {}
        if self.source != ALL:
            args["source"] = [self.source]
        if self.port:
            args["port"] = [self.port]
        if self.country:
            args["country"] = [self.country]
        if self.port_name.strip():
            args["port_name"] = [self.port_name.strip()]
        if self.date_from is not None:
            args["from"] = [self.date_from.isoformat()]
        if self.date_to is not None:
            args["to"] = [self.date_to.isoformat()]
        if self.commodity:
            args["commodity"] = [",".join(self.commodity)]
        if self.latest:
            args["latest"] = ["true"]
        if self.merge != ALL:
            args["merge"] = [self.merge]
        return args

    def query(self, taxonomy) -> LineupQuery:
        """The validated query. Raises ValidationError with the API's message."""
        query, _limit, _cursor = parse_query(self.to_args(), taxonomy.parse_filter)
        return query

    def describe(self, feed_names: dict[str, str] | None = None) -> str:
        return describe_filters({k: v[0] for k, v in self.to_args().items()}, feed_names)


class LineupsModel(param.Parameterized):
    """The buyer's lineups under the current filters, and the row they look at."""

    account = param.ClassSelector(class_=Account, constant=True, precedence=-1)
    filters = param.ClassSelector(class_=LineupFilters, constant=True, precedence=-1)
    selection = param.DataFrame(default=None, allow_None=True, precedence=-1, doc="""
        The rows of the query in C3 order (C1 columns and the merge's own).""")
    row_count = param.Integer(default=0, bounds=(0, None))
    error = param.String(default="", doc="Why there are no rows: the API's message.")
    selected_id = param.String(default="", doc="The id of the row whose detail is shown.")
    detail = param.Dict(default=None, allow_None=True, precedence=-1, doc="""
        The selected row's provenance (`explain`) and ETA history (`eta`).""")

    def __init__(self, account: Account, **params):
        taxonomy = account.context.taxonomy
        commodities = [*taxonomy.groups(), *taxonomy.subgroups(), *sorted(l.name for l in taxonomy.leaves)]
        params.setdefault("filters", LineupFilters(account.feeds, commodities))
        super().__init__(account=account, **params)
        self.refresh()

    # ------------------------------------------------------------ store work
    @param.depends("filters.param", watch=True)
    def refresh(self) -> None:
        """Run the query for the current filters (C3)."""
        try:
            query = self.filters.query(self.account.context.taxonomy)
            with self.account.store() as (session, buyer):
                rows = self.account.service.select(session, buyer.id, query).rows
        except SessionLost:
            return
        except LineupsError as error:
            self.param.update(selection=empty_rows(), row_count=0, error=error.message, selected_id="")
            return
        self.param.update(selection=rows, row_count=len(rows), error="", selected_id="")

    @param.depends("selected_id", watch=True)
    def _explain(self) -> None:
        if not self.selected_id:
            self.detail = None
            return
        try:
            query = self.filters.query(self.account.context.taxonomy)
            with self.account.store() as (session, buyer):
                explained = self.account.service.explain(session, buyer.id, self.selected_id, query)
                slips = history.eta_slips(session, _record_keys(explained))
        except SessionLost:
            return
        except LineupsError as error:
            self.detail = {"error": error.message}
            return
        self.detail = {"explain": explained, "eta": eta_history(slips, self.account.feed_names)}

    def select_row(self, position: int | None) -> None:
        """Show the detail of the table row at `position` (None: none)."""
        rows = self.selection
        if position is None or rows is None or not 0 <= position < len(rows):
            self.selected_id = ""
        else:
            self.selected_id = str(rows["id"].iloc[position])

    def csv_file(self) -> io.BytesIO | None:
        """The whole result of the current filters as CSV (C9), read afresh."""
        try:
            query = self.filters.query(self.account.context.taxonomy)
            with self.account.store() as (session, buyer):
                rows = self.account.service.select(session, buyer.id, query).rows
        except (SessionLost, LineupsError):
            return None
        return io.BytesIO(csv_bytes(rows))

    # ------------------------------------------------------------ derived data
    @param.depends("selection")
    def table(self) -> pd.DataFrame:
        """The rows as the table shows them: a few columns, times as UTC text, the
        port with its LOCODE, the raw commodity where the taxonomy has no name yet."""
        rows = (self.selection if self.selection is not None else empty_rows()).reset_index(drop=True)
        derived = {
            "port": _text(rows["port_name"]).fillna("") + " · " + _text(rows["port_unlocode"]).fillna(""),
            "commodity": _text(rows["commodity_normalized"]).fillna(_text(rows["commodity"]).fillna("") + " (unresolved)"),
        }
        frame = pd.DataFrame(index=rows.index)
        for column in TABLE_COLUMNS:
            if column in derived:
                values = derived[column]
            elif column in ("eta", "etb", "etd"):
                values = _short_times(rows[column])
            elif column == "quantity":
                values = pd.to_numeric(rows[column], errors="coerce").astype(float)
            else:
                values = _text(rows[column])
            # None, not NaN, where there is no value: the table shows an empty cell, not "NaN".
            frame[column] = values.astype(object).where(values.notna(), None)
        return frame

    @param.depends("selection")
    def weekly_quantity(self) -> pd.DataFrame:
        return charts.weekly_quantity(self.selection if self.selection is not None else empty_rows())

    @param.depends("selection")
    def status_by_port(self) -> pd.DataFrame:
        return charts.status_by_port(self.selection if self.selection is not None else empty_rows())

    @param.depends("filters.param")
    def summary(self) -> str:
        return self.filters.describe(self.account.feed_names)


def _text(values: pd.Series) -> pd.Series:
    """Text values as an object column with None for nulls."""
    return values.astype(object).where(values.notna(), None)


def _short_times(values: pd.Series) -> pd.Series:
    times = pd.to_datetime(values, utc=True)
    text = times.dt.strftime("%Y-%m-%d %H:%M")
    return text.astype(object).where(times.notna(), None)


def _record_keys(explained: dict[str, Any]) -> list[tuple[str, str]]:
    """(feed id, ref) of every record an explanation names."""
    return [(r["source_id"], r["ref"]) for r in explained.get("records", []) if r.get("ref")]


def eta_history(slips: dict, feed_names: dict[str, str]) -> list[dict[str, Any]]:
    """One entry per record: its feed, ref, the ETAs it announced in order, and how
    many hours the current ETA is after the first one."""
    out = []
    for (feed_id, ref), slip in sorted(slips.items(), key=lambda i: (feed_names.get(i[0][0], ""), i[0][1])):
        out.append(
            {
                "feed": feed_names.get(feed_id, feed_id),
                "ref": ref,
                "etas": [format_time(eta) for _version, eta in slip.etas],
                "first_eta": format_time(slip.first_eta),
                "current_eta": format_time(slip.current_eta),
                "slip_hours": None if slip.slip_hours is None else round(slip.slip_hours, 1),
            }
        )
    return out
