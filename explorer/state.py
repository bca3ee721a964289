"""The explorer's state: what the store answered for the buyer's filters.

`LineupsModel` holds, for one `explorer.filters.LineupFilters` query, the count, the
page of rows on screen, the charts' totals (computed in SQL), the message when there
is nothing to show, and the provenance of the row the buyer picked. Nothing it holds
grows with the result: the CSV download is the API's, streamed (`download_path`). Store work
happens only in `watch=True` methods, each awaiting `Account.run()` (the explorer's
threads, never the event loop), and always goes through `explorer.data`.
"""

from __future__ import annotations

import functools
import logging
from urllib.parse import urlencode
from typing import Any, Mapping

import pandas as pd
import param

from explorer import charts, data
from explorer.auth import DOWNLOAD_PATH
from store.merging.duplicates import WINDOW, likely_duplicates
from explorer.session import Account, SessionLost
from explorer.filters import LineupFilters
from explorer.words import problem
from store.views import history
from store.errors import LineupsError
from store.fields import RECORD_FIELDS, format_time
from store.views.lineups import Summary
from store.query import LineupQuery

log = logging.getLogger("lineups.explorer")

PAGE_SIZE = 50
#: The table's columns: what each shows, in the order of the column chooser.
COLUMN_TITLES = {
    "vessel": "Vessel", "port": "Port", "commodity": "Commodity", "qty": "Qty", "eta": "ETA (UTC)",
    "etb": "ETB (UTC)", "etd": "ETD (UTC)", "status": "Status", "feeds": "Feeds", "imo": "IMO", "operation": "Operation",
    "country": "Country", "berth": "Berth", "shipper": "Shipper", "receiver": "Receiver",
    "charterer": "Charterer", "updated": "Updated (UTC)",
}
#: ETD too: a call that began days ago is upcoming when its ETD is not past (issue 45
#: item 4: the dates the first view's "from today" matched are on screen).
DEFAULT_COLUMNS = ["vessel", "port", "commodity", "qty", "eta", "etb", "etd", "status", "feeds"]
#: The orders a buyer can pick: label → (column of `explorer.data.SORTABLE`, or "" for C3's).
SORT_ORDERS = {
    "Date (earliest ETA, ETB or ETD)": "", "Vessel": "vessel_name", "Port": "port_name",
    "Commodity": "commodity_normalized", "Quantity (within each unit)": "quantity", "ETA": "eta", "ETB": "etb", "ETD": "etd",
    "Status": "vessel_status", "Feeds": "source_name", "IMO": "vessel_imo", "Operation": "operation",
    "Country": "country_name", "Last updated": "updated_at",
}
#: The address's names for the table's order, page and columns (Datasette's `_sort`,
#: `_sort_desc` and `_col`): they begin with `_`, as no /v1/lineups parameter does.
SORT_ARG, SORT_DESC_ARG, PAGE_ARG, COLUMNS_ARG = "_sort", "_sort_desc", "_page", "_col"
VIEW_ARGS = (SORT_ARG, SORT_DESC_ARG, PAGE_ARG, COLUMNS_ARG)
FAILED = "The lineups could not be loaded, so none are shown. Try again in a moment, or reload the page."
CHARTS_FAILED = "The charts could not be drawn for these filters. Try again in a moment, or reload the page."


def empty_rows() -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(dtype=object) for name in RECORD_FIELDS})


class LineupsModel(param.Parameterized):
    """The buyer's lineups under the current filters, the page on screen, and the row
    they look at."""

    account = param.ClassSelector(class_=Account, constant=True, precedence=-1)
    filters = param.ClassSelector(class_=LineupFilters, constant=True, precedence=-1)
    page_rows = param.DataFrame(default=None, allow_None=True, precedence=-1, doc="""
        The rows of the page on screen, in the chosen order.""")
    row_count = param.Integer(default=0, bounds=(0, None))
    page = param.Integer(default=0, bounds=(0, None), doc="The page on screen (0: the first).")
    sort_by = param.Selector(default="", objects=SORT_ORDERS, label="Sort by")
    descending = param.Boolean(default=False, label="Descending")
    previous_page = param.Event(label="‹ Previous")
    next_page = param.Event(label="Next ›")
    columns = param.ListSelector(default=list(DEFAULT_COLUMNS), objects={t: c for c, t in COLUMN_TITLES.items()}, label="Columns")
    busy = param.Boolean(default=False, doc="A query of rows (the page and the count) is running.")
    charting = param.Boolean(default=False, doc="""
        The charts' totals are being read (after the rows are on screen: a table
        first, the charts when they are ready).""")
    charts_problem = param.String(default="", doc="Why the charts show nothing, in the buyer's words.")
    error = param.String(default="", doc="Why there are no rows, in the buyer's words.")
    download_path = param.String(default="", precedence=-1, doc="""
        Where the "Download CSV (all rows)" button goes: the explorer's download
        (`explorer.auth.DownloadHandler`) of the current filters, which sends the
        browser on to the API's streamed CSV of the whole result (C9, through the
        export slots and the row ceiling; issue 49 item 5). Empty while the filters
        select nothing (`error`).""")
    described = param.String(default="", doc="""
        The filters of the rows on screen in words (set with the rows, never before).""")
    duplicates = param.Dict(default={}, precedence=-1, doc="{row id on the page: why it looks like another row}.")
    weekly = param.DataFrame(default=None, allow_None=True, precedence=-1, doc="`charts.weekly_quantity` of the result.")
    statuses = param.DataFrame(default=None, allow_None=True, precedence=-1, doc="`charts.status_by_port` of the result.")
    left_out = param.Dict(default={}, precedence=-1, doc="{unit: rows} the tonnes chart leaves out.")
    selected_id = param.String(default="", doc="The id of the row whose detail is shown.")
    detail = param.Dict(default=None, allow_None=True, precedence=-1, doc="""
        The selected row's provenance (`explain`), ETA history (`eta`) and possible
        duplicate (`duplicate`).""")

    def __init__(self, account: Account, read: bool = True, **params):
        """`read=False`: no first read; the caller awaits `read_first` before the
        model is drawn."""
        params.setdefault("filters", LineupFilters.of(account))
        super().__init__(account=account, **params)
        self._generation = 0
        self._page_generation = 0
        if read:
            # The first read: on the event loop's next turn in a served session
            # (Panel's executor), its store work on the explorer's threads.
            param.parameterized.async_executor(functools.partial(self._refresh_at, self.page))

    # ------------------------------------------------------------ store work
    @param.depends("filters.param", watch=True)
    async def refresh(self) -> None:
        """Run the query for the current filters (C3): the count, the first page, the
        charts. A later change wins over a query still running."""
        await self._refresh_at(0)

    async def _refresh_at(self, page: int) -> None:
        shown = await self._read_rows(page)
        if shown is not None:
            await self._after_rows(*shown)

    async def read_first(self) -> None:
        """The first read of a model made with `read=False`: the rows now, so that a
        page that draws the model after this draws its table once, with its rows (a
        table drawn empty and filled when the rows arrive is drawn twice, ~0.3 s more
        of the browser's time to the first view); the rest on the event loop's next
        turn. The page is the model's (an address names it, `set_view_args`)."""
        shown = await self._read_rows(self.page)
        if shown is not None:
            param.parameterized.async_executor(functools.partial(self._after_rows, *shown))

    async def _after_rows(self, query: LineupQuery, generation: int) -> None:
        """What follows the rows on screen: which of them look like duplicates, then
        the charts (at 1,000,000 records the duplicate check read for ~0.3 s, the
        charts' totals for ~2 s, and the rows came after both had been read)."""
        await self._read_duplicates(query, generation, self._page_generation)
        await self._read_charts(query, generation)

    async def _read_rows(self, page: int = 0) -> tuple[LineupQuery, int] | None:
        """The count and page `page` (the last one when the result has fewer) of the
        current filters, shown; returns the query and its generation, or None when it
        failed (said on screen) or a later change took its place."""
        self._generation += 1
        generation = self._generation
        taxonomy = self.account.context.taxonomy
        try:
            query = self.filters.query(taxonomy)
        except LineupsError as error:
            self._show_nothing(problem(error))
            return None
        self.busy = True
        try:
            order = self._order()
            result = await self.account.run(lambda session, buyer: _result(session, buyer.id, query, order, page))
        except SessionLost:
            return None
        except LineupsError as error:
            if generation == self._generation:
                self._show_nothing(problem(error))
            return None
        except Exception:
            log.exception("The explorer could not read the lineups of %s", self.account.buyer_id)
            if generation == self._generation:
                self._show_nothing(FAILED)
            return None
        finally:
            if generation == self._generation:
                self.busy = False
        if generation != self._generation:
            return None
        self._show(result)
        return query, generation

    async def _read_charts(self, query: LineupQuery, generation: int) -> None:
        """The charts' totals of the result on screen, summed in SQL; a later filter
        change wins, a failure is said under the charts."""
        self.charting = True
        try:
            totals = await self.account.run(lambda session, buyer: _charts(session, buyer.id, query))
        except SessionLost:
            return
        except Exception:
            log.exception("The explorer could not total the lineups of %s", self.account.buyer_id)
            totals = None
        finally:
            if generation == self._generation:
                self.charting = False
        if generation != self._generation:
            return
        if totals is None:
            self.param.update(charts_problem=CHARTS_FAILED, **_charts_of(Summary.empty()))
        else:
            self.param.update(charts_problem="", **totals)

    def read_now(self) -> None:
        """Read the rows of the current filters at once, in this thread: for notebooks
        and scripts, whose event loop would run `refresh` only later."""
        self._generation += 1
        try:
            query = self.filters.query(self.account.context.taxonomy)
            with self.account.store() as (session, buyer):
                result = {**_result(session, buyer.id, query, self._order()), **_charts(session, buyer.id, query)}
                result["duplicates"] = _duplicates(session, buyer.id, query, result["page_rows"])
        except SessionLost:
            return
        except LineupsError as error:
            self._show_nothing(problem(error))
            return
        self._show(result)

    def _show(self, result: dict[str, Any]) -> None:
        with param.parameterized.batch_call_watchers(self):
            self._set_page_silently(result.pop("page", 0))
            self.param.update(error="", selected_id="", described=self.summary(), busy=False, **result)

    @param.depends("sort_by", "descending", watch=True)
    async def _resort(self) -> None:
        """Back to the first page, in the new order."""
        self._set_page_silently(0)
        await self._read_page()

    @param.depends("page", watch=True)
    async def _turn(self) -> None:
        if not self._paging:
            await self._read_page()

    async def _read_page(self) -> None:
        """Read the page on screen after paging or re-sorting."""
        if self.row_count == 0:
            return
        self._page_generation += 1
        generation, filters_generation = self._page_generation, self._generation
        try:
            query = self.filters.query(self.account.context.taxonomy)
        except LineupsError:
            return
        offset, order = self.page * PAGE_SIZE, self._order()
        self.busy = True
        try:
            rows = await self.account.run(
                lambda session, buyer: data.page(session, buyer.id, query, offset, PAGE_SIZE, order)
            )
        except SessionLost:
            return
        except Exception:
            log.exception("The explorer could not read a page of %s", self.account.buyer_id)
            rows = None
        finally:
            self.busy = False
        if generation != self._page_generation or filters_generation != self._generation:
            return
        if rows is None:
            self._show_nothing(FAILED)
            return
        self.param.update(page_rows=rows.reset_index(drop=True), duplicates={}, selected_id="")
        await self._read_duplicates(query, filters_generation, generation)

    async def _read_duplicates(self, query: LineupQuery, generation: int, page_generation: int) -> None:
        """Which rows on screen look like another row of the result, read after the
        rows are shown; a later filter change or page wins, and a failure leaves the
        rows unflagged (logged)."""
        rows = self.page_rows
        if rows is None or rows.empty:
            return
        try:
            duplicates = await self.account.run(lambda session, buyer: _duplicates(session, buyer.id, query, rows))
        except SessionLost:
            return
        except Exception:
            log.exception("The explorer could not check the page of %s for duplicates", self.account.buyer_id)
            return
        if generation == self._generation and page_generation == self._page_generation and rows is self.page_rows:
            self.duplicates = duplicates

    _paging = False

    def _set_page_silently(self, page: int) -> None:
        """Go to `page` without reading it (the caller has it)."""
        self._paging = True
        try:
            self.page = page
        finally:
            self._paging = False

    @param.depends("previous_page", watch=True)
    def _previous(self) -> None:
        self._step(-1)

    @param.depends("next_page", watch=True)
    def _next(self) -> None:
        self._step(1)

    def _step(self, by: int) -> None:
        last = max(0, (self.row_count - 1) // PAGE_SIZE)
        self.page = min(last, max(0, self.page + by))

    def _order(self) -> tuple[str, bool] | None:
        return (self.sort_by, not self.descending) if self.sort_by else None

    def view_args(self) -> dict[str, str]:
        """The table's order, page and columns as the page's address names them
        (issue 45 item 7), defaults left out: `_sort=quantity` or `_sort_desc=quantity`,
        `_page=3` (from 1), `_col=vessel,port,qty`."""
        args: dict[str, str] = {}
        if self.sort_by:
            args[SORT_DESC_ARG if self.descending else SORT_ARG] = self.sort_by
        if self.page:
            args[PAGE_ARG] = str(self.page + 1)
        if list(self.columns) != DEFAULT_COLUMNS:
            args[COLUMNS_ARG] = ",".join(c for c in COLUMN_TITLES if c in self.columns)
        return args

    @staticmethod
    def view_params(args: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
        """The params (`sort_by`, `descending`, `page`, `columns`) an address's
        `view_args` give, to make a model with, and what of them could not be used, in
        words (issue 45 item 9: a bad value is said, the rest applies)."""
        params: dict[str, Any] = {}
        ignored: list[str] = []
        if SORT_ARG in args and SORT_DESC_ARG in args:
            ignored.append("the address names two orders, so the table is in date order")
        else:
            name = SORT_DESC_ARG if SORT_DESC_ARG in args else SORT_ARG
            column = args.get(name)
            if column in SORT_ORDERS.values() and column:
                params.update(sort_by=column, descending=name == SORT_DESC_ARG)
            elif column is not None:
                ignored.append(f"the table cannot be sorted by “{column}”, so it is in date order")
        if PAGE_ARG in args:
            text = args[PAGE_ARG]
            if text.isascii() and text.isdigit() and int(text) >= 1:
                params["page"] = int(text) - 1
            else:
                ignored.append(f"“{text}” is not a page number, so the first page is shown")
        if COLUMNS_ARG in args:
            names = [name.strip() for name in args[COLUMNS_ARG].split(",") if name.strip()]
            known = [c for c in COLUMN_TITLES if c in names]
            ignored += [f"“{name}” is not a column of the table" for name in names if name not in COLUMN_TITLES]
            if known:
                params["columns"] = known
        return params, ignored

    def _show_nothing(self, message: str) -> None:
        """No rows, and why: never the old rows under new filters."""
        empty, nothing = empty_rows(), Summary.empty()
        with param.parameterized.batch_call_watchers(self):
            self._set_page_silently(0)
            self.param.update(
                page_rows=empty, row_count=0, error=message, selected_id="", duplicates={},
                busy=False, charting=False, charts_problem="", described=self.summary(), **_charts_of(nothing),
            )

    @param.depends("selected_id", watch=True)
    async def _explain(self) -> None:
        row_id = self.selected_id
        if not row_id:
            self.detail = None
            return
        try:
            query = self.filters.query(self.account.context.taxonomy)
            explained, slips = await self.account.run(lambda session, buyer: _explained(session, buyer.id, row_id, query))
        except SessionLost:
            return
        except LineupsError as error:
            self.detail = {"error": problem(error)}
            return
        except Exception:
            log.exception("The explorer could not explain row %s", row_id)
            self.detail = {"error": "Where this row came from could not be read. Try again in a moment."}
            return
        if row_id == self.selected_id:
            self.detail = {
                "explain": explained, "eta": eta_history(slips, self.account.feed_names),
                "duplicate": self.duplicates.get(row_id, ""),
            }

    def select_row(self, position: int | None) -> None:
        """Show the detail of the row at `position` of the page on screen (None: none)."""
        rows = self.page_rows
        if position is None or rows is None or not 0 <= position < len(rows):
            self.selected_id = ""
        else:
            self.selected_id = str(rows["id"].iloc[position])

    @param.depends("filters.param", "error", watch=True, on_init=True)
    def _point_download(self) -> None:
        self.download_path = "" if self.error else f"{DOWNLOAD_PATH}?{urlencode(self.filters.url_args())}"

    # ------------------------------------------------------------ derived data
    @param.depends("page_rows", "duplicates", "columns")
    def table(self) -> pd.DataFrame:
        """The page as the table shows it: the chosen columns (and the row id), times
        as UTC text, quantities with their unit, "⚠" before a likely duplicate."""
        rows = (self.page_rows if self.page_rows is not None else empty_rows()).reset_index(drop=True)
        frame = table_frame(rows, self.duplicates)
        return frame[["id", *[c for c in COLUMN_TITLES if c in self.columns]]]

    @param.depends("row_count", "page")
    def range_text(self) -> str:
        """"1–50 of 3,908" (nothing when there are no rows)."""
        if not self.row_count:
            return ""
        first = self.page * PAGE_SIZE + 1
        last = min(self.row_count, first + PAGE_SIZE - 1)
        return f"{first:,}–{last:,} of {self.row_count:,}"

    @param.depends("row_count", "page")
    def on_last_page(self) -> bool:
        """Whether the page on screen is the last (Next has nowhere to go)."""
        return self.page >= max(0, (self.row_count - 1) // PAGE_SIZE)

    @param.depends("sort_by")
    def order_note(self) -> str:
        """What the order on screen is, where it is not plain: quantities are compared
        within one unit (issue 45 item 5), and downloads keep the date order (item 7)."""
        if not self.sort_by:
            return ""
        note = ("Quantities are compared within one unit: tonnes (MT) first, then barrels (BBL), then units; "
                "rows without a quantity last. ") if self.sort_by == "quantity" else ""
        return note + "The CSV download and share links list the rows by date (the API's order), not in this order."

    @param.depends("filters.param")
    def summary(self) -> str:
        return self.filters.describe(self.account.feed_names)


def _result(session, buyer_id: str, query: LineupQuery, order, page: int = 0) -> dict[str, Any]:
    """The rows a filter change shows, read on the explorer's threads: the count and
    page `page` (the last page when there are fewer), never the whole result (which of
    them look like duplicates is read after they are shown, `_duplicates`)."""
    count = data.count(session, buyer_id, query)
    page = min(page, max(0, (count - 1) // PAGE_SIZE))
    rows = data.page(session, buyer_id, query, page * PAGE_SIZE, PAGE_SIZE, order)
    return {"row_count": count, "page_rows": rows.reset_index(drop=True), "duplicates": {}, "page": page}


def _charts(session, buyer_id: str, query: LineupQuery) -> dict[str, Any]:
    """The charts' frames of the whole result, from its totals summed in SQL."""
    return _charts_of(data.summary(session, buyer_id, query))


def _charts_of(totals: Summary) -> dict[str, Any]:
    return {
        "weekly": charts.weekly_quantity(totals.tonnes),
        "statuses": charts.status_by_port(totals.statuses),
        "left_out": charts.left_out(totals.units),
    }


def _duplicates(session, buyer_id: str, query: LineupQuery, rows: pd.DataFrame) -> dict[str, str]:
    """Which of a page's `rows` look like another row of the result (merged rows
    only): the check reads the result's rows at the page's ports dated within
    `WINDOW` of a page row, the only rows a likely duplicate can be among."""
    if query.merge != "all" or rows.empty:
        return {}
    dated = rows[rows["combined_date"].notna()]
    if dated.empty:
        return {}
    window = WINDOW.value
    spans: list[list[int]] = []
    for at in sorted(pd.DatetimeIndex(dated["combined_date"]).asi8.tolist()):
        if spans and at - window <= spans[-1][1]:
            spans[-1][1] = at + window
        else:
            spans.append([at - window, at + window])
    near = data.near(session, buyer_id, query, dated["port_unlocode"].astype(str).unique().tolist(), [tuple(s) for s in spans])
    found = likely_duplicates(near)
    on_page = set(rows["id"].astype(str))
    return {row_id: why for row_id, why in found.items() if row_id in on_page}


def _explained(session, buyer_id: str, row_id: str, query: LineupQuery):
    explained = data.explain(session, buyer_id, row_id, query)
    return explained, history.eta_slips(session, _record_keys(explained))


def table_frame(rows: pd.DataFrame, duplicates: Mapping[str, str]) -> pd.DataFrame:
    """Every column of COLUMN_TITLES (and `id`) for `rows`, as text; None for blanks."""
    if rows.empty:
        return pd.DataFrame({name: pd.Series(dtype=object) for name in ("id", *COLUMN_TITLES)})
    vessel = _text(rows["vessel_name"]).fillna(_text(rows["vessel_imo"]).map(lambda v: f"IMO {v}", na_action="ignore"))
    flagged = rows["id"].astype(str).isin(set(duplicates))
    derived = {
        "id": _text(rows["id"]),
        "vessel": vessel.where(~flagged, "⚠ " + vessel.fillna("")),
        "port": _text(rows["port_name"]).fillna("") + " · " + _text(rows["port_unlocode"]).fillna(""),
        "commodity": _text(rows["commodity_normalized"]).fillna(_text(rows["commodity"]).fillna("") + " (unresolved)"),
        "qty": _quantity_text(rows["quantity"], rows["quantity_unit"]),
        "eta": _short_times(rows["eta"]),
        "etb": _short_times(rows["etb"]),
        "etd": _short_times(rows["etd"]),
        "status": _text(rows["vessel_status"]),
        "feeds": _text(rows["source_name"]).str.replace(";", "; ", regex=False),
        "imo": _text(rows["vessel_imo"]),
        "operation": _text(rows["operation"]).map({"load": "Load", "disch": "Discharge"}.get, na_action="ignore"),
        "country": _text(rows["country_name"]),
        "berth": _text(rows["berth_terminal"]),
        "shipper": _text(rows["shipper"]),
        "receiver": _text(rows["receiver"]),
        "charterer": _text(rows["charterer"]),
        "updated": _short_times(rows["updated_at"]),
    }
    frame = pd.DataFrame(index=rows.index)
    for column, values in derived.items():
        # None, not NaN, where there is no value: the table shows an empty cell.
        frame[column] = values.astype(object).where(values.notna(), None)
    return frame


def _quantity_text(quantity: pd.Series, unit: pd.Series) -> pd.Series:
    numbers = pd.to_numeric(quantity, errors="coerce")
    text = numbers.map(lambda q: f"{q:,.0f}", na_action="ignore")
    return (text + " " + _text(unit).fillna("")).str.strip().where(numbers.notna(), None)


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
