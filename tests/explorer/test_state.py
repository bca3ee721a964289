"""The explorer's param classes over the demo store: set params, assert params and
the data they derive (issue 6, "Unit tests drive the param classes")."""

from __future__ import annotations

import asyncio
import datetime as dt
import html
import re
import sqlite3

import pandas as pd
import pytest

from explorer import charts
from explorer.feeds import FeedsModel
from explorer.shares import SharesModel
from explorer.state import COLUMN_TITLES, DEFAULT_COLUMNS, PAGE_SIZE, LineupsModel
from explorer.views.detail import detail_view, provenance_frame, resolution_lines
from store.access import accounts, links
from store.database.db import transaction
from store.errors import Unauthorized, ValidationError
from store.fields import RECORD_FIELDS
from store.views.lineups import Summary
from store.query import LineupQuery, parse_query
from store.reference.taxonomy import default_taxonomy
from store.settings import sqlite_path

ENTITLED = {
    "Brazil Grains Lineup": "active",
    "Global Tanker Tracker": "active",
    "Iron Ore Watch": "trial",
    "Pacific Dry Bulk Monitor": "active",
    "South Atlantic Agency Reports": "active",
}


def api_rows(context, buyer_id, args):
    """What /v1/lineups selects for `args`: the same parser and the same service."""
    query = parse_query(args, default_taxonomy().parse_filter)[0]
    return context.service.frame(buyer_id, query)


def result_of(model: LineupsModel) -> pd.DataFrame:
    """The whole result of the model's current filters, read the way the API's CSV reads
    it (keyset blocks): what its pages, count and charts must agree with."""
    account = model.account
    return account.context.service.frame(account.buyer_id, model.filters.query(account.context.taxonomy))


def every_page(model: LineupsModel) -> list[str]:
    """The ids of every page the buyer can turn to, from the first."""
    model.page = 0
    ids = list(model.page_rows["id"])
    while len(ids) < model.row_count:
        model.param.trigger("next_page")
        ids += list(model.page_rows["id"])
    return ids


def api_message(args) -> str:
    """The explorer's words for the API's refusal of `args`."""
    from explorer.words import problem

    with pytest.raises(ValidationError) as raised:
        parse_query(args, default_taxonomy().parse_filter)
    return problem(raised.value)


def feed_id(account, name: str) -> str:
    return next(f["id"] for f in account.feeds if f["name"] == name)


# ---------------------------------------------------------------- filters
def test_filters_offer_the_buyers_feeds_ports_and_the_taxonomy(account):
    model = LineupsModel(account)
    filters = model.filters
    sources = filters.param.source.names
    assert list(sources) == ["All my feeds", *sorted(ENTITLED)]  # the cancelled feed is not offered
    assert sources["All my feeds"] == "all"
    ports = set(filters.param.port.objects) - {""}
    assert {"BRSSZ", "NLRTM", "KRPUS", "ZARCB"} <= ports
    assert not {"BEANR", "ESALG"} & ports  # ports of the cancelled feed only
    assert "Brazil" in filters.param.country.objects and "Belgium" not in filters.param.country.objects
    taxonomy = default_taxonomy()
    assert set(filters.param.commodity.objects) == set(taxonomy.all_names())
    labels = filters.param.commodity.names  # the tree: each name first, then where it sits
    assert labels[f"{taxonomy.groups()[0]} (all)"] == taxonomy.groups()[0]
    assert all(label.startswith(name) for label, name in labels.items())
    assert all(" › " in label for label, name in labels.items() if name not in taxonomy.groups() + taxonomy.subgroups())


def test_default_filters_are_no_parameters(account):
    filters = LineupsModel(account).filters
    assert filters.to_args() == {}
    assert filters.query(default_taxonomy()) == LineupQuery()


def test_every_filter_becomes_its_api_parameter(account):
    filters = LineupsModel(account).filters
    santos = feed_id(account, "Brazil Grains Lineup")
    filters.param.update(
        source=santos, port="BRSSZ", country="Brazil", port_name="  San ", date_from=dt.date(2026, 11, 1),
        date_to=dt.date(2026, 11, 30), commodity=["Soybeans", "Dry Bulk"], latest=True, merge="by_source",
    )
    assert filters.to_args() == {
        "source": [santos],
        "port": ["BRSSZ"],
        "country": ["Brazil"],
        "port_name": ["San"],
        "from": ["2026-11-01"],
        "to": ["2026-11-30"],
        "commodity": ["Soybeans,Dry Bulk"],
        "latest": ["true"],
        "merge": ["by_source"],
    }
    query = filters.query(default_taxonomy())
    assert query == parse_query(filters.to_args(), default_taxonomy().parse_filter)[0]
    assert (query.source, query.port, query.latest, query.merge) == (santos, "BRSSZ", True, "by_source")
    assert query.commodity == ("Dry Bulk", "Soybeans")


def test_filters_in_words(account):
    filters = LineupsModel(account).filters
    assert filters.describe() == "All lineups"
    filters.param.update(port="NLRTM", commodity=["Crude Oil"], latest=True, date_from=dt.date(2026, 11, 1))
    assert filters.describe() == (
        "Port Rotterdam (NLRTM) · commodity Crude Oil · from 2026-11-01 · latest call per vessel and port only"
    )


# ---------------------------------------------------------------- lineups
def test_the_model_selects_what_the_api_selects(account, context, demo):
    model = LineupsModel(account)
    expected = api_rows(context, demo["buyer_id"], {})
    assert model.error == ""
    assert model.row_count == len(expected) > PAGE_SIZE
    assert every_page(model) == list(expected["id"])


def test_a_filter_change_reselects_the_rows(account, context, demo):
    model = LineupsModel(account)
    everything = model.row_count
    model.filters.port = "BRSSZ"
    assert 0 < model.row_count < everything
    assert set(model.page_rows["port_unlocode"]) == {"BRSSZ"}
    assert every_page(model) == list(api_rows(context, demo["buyer_id"], {"port": ["BRSSZ"]})["id"])
    model.filters.param.update(commodity=["Soybeans"], latest=True)
    args = {"port": ["BRSSZ"], "commodity": ["Soybeans"], "latest": ["true"]}
    assert every_page(model) == list(api_rows(context, demo["buyer_id"], args)["id"])


def test_an_invalid_combination_shows_the_apis_message(account):
    model = LineupsModel(account)
    model.filters.param.update(date_from=dt.date(2026, 12, 1), date_to=dt.date(2026, 11, 1))
    assert model.error == api_message({"from": ["2026-12-01"], "to": ["2026-11-01"]})
    assert model.error.startswith("The From date is after the To date")
    assert model.row_count == 0 and model.page_rows.empty
    model.filters.date_to = dt.date(2026, 12, 31)
    assert model.error == "" and model.row_count > 0


def test_the_table_shows_the_selected_rows(account):
    model = LineupsModel(account)
    model.filters.port = "NLRTM"
    table = model.table()
    assert tuple(table.columns) == ("id", *DEFAULT_COLUMNS)
    assert len(table) == min(PAGE_SIZE, model.row_count)
    assert list(table["id"]) == list(result_of(model)["id"].iloc[:PAGE_SIZE])
    assert table["port"].str.endswith("NLRTM").all()
    assert table["eta"].dropna().str.match(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}$").all()
    # A row without a quantity shows an empty cell, never "NaN"; numbers with separators and unit.
    missing = model.page_rows["quantity"].isna().to_numpy()
    assert all(v is None for v in table["qty"][missing])
    assert table["qty"][~missing].str.match(r"^\d{1,3}(,\d{3})* \w+$").all()
    model.columns = [*DEFAULT_COLUMNS, "imo", "etd"]
    assert list(model.table().columns) == ["id", *[c for c in COLUMN_TITLES if c in model.columns]]


def test_charts_follow_the_filters(account):
    """The charts' totals, summed in SQL, are those of the whole result."""
    model = LineupsModel(account)
    rows = result_of(model)
    weekly = model.weekly
    tonnes = rows[(rows["quantity_unit"] == "MT") & rows["combined_date"].notna() & rows["quantity"].notna()]
    assert weekly["kt"].sum() == pytest.approx(tonnes["quantity"].sum() / 1000)
    assert set(weekly["week"].map(lambda w: dt.date.fromisoformat(w).weekday())) == {0}
    by_port = model.statuses
    assert by_port["vessels"].sum() == rows.groupby(["port_unlocode", "vessel_status"])["vessel_key"].nunique().sum()
    model.filters.commodity = ["Crude Oil"]
    assert set(model.weekly["group"]) <= {"Liquid Bulk"}  # crude is in barrels: no MT rows
    crude = result_of(model)
    assert model.left_out and sum(model.left_out.values()) == crude["quantity"].notna().sum() - (
        (crude["quantity_unit"] == "MT") & crude["quantity"].notna()).sum()
    assert model.left_out == {
        str(unit): n for unit, n in crude.loc[crude["quantity"].notna() & (crude["quantity_unit"] != "MT"), "quantity_unit"]
        .fillna("no unit").value_counts().items()
    }
    assert set(model.statuses["port"].str[-6:-1]) <= {"USHOU", "USCRP", "NLRTM"}
    groups = [*account.context.taxonomy.groups(), charts.UNRESOLVED]
    chart = charts.weekly_quantity_chart(groups)
    charts.draw_weekly_quantity(chart, weekly)
    bars = pd.DataFrame(chart.renderers[0].data_source.data)
    assert list(chart.x_range.factors) == sorted(set(weekly["week"]))
    assert (bars["end"] - bars["start"]).sum() == pytest.approx(weekly["kt"].sum())
    tops = bars.groupby("week")["end"].max()
    assert tops.to_dict() == pytest.approx(weekly.groupby("week")["kt"].sum().to_dict())
    listed = list(dict.fromkeys(bars["group"]))  # the legend's entries, in its order
    assert listed == [group for group in groups if group in set(weekly["group"])]
    charts.draw_weekly_quantity(chart, model.weekly)
    assert set(chart.renderers[0].data_source.data["group"]) == set(model.weekly["group"])


def test_the_charts_are_redrawn_in_place(account):
    model = LineupsModel(account)
    chart = charts.status_by_port_chart()
    charts.draw_status_by_port(chart, model.statuses)
    ports = list(chart.y_range.factors)
    assert ports == sorted(ports, reverse=True)  # the first port in name order on top
    assert chart.height == max(240, 28 * len(ports) + 90)
    model.filters.port = "NLRTM"
    charts.draw_status_by_port(chart, model.statuses)
    assert list(chart.y_range.factors) == ["Rotterdam (NLRTM)"] and chart.height == 240
    bars = pd.DataFrame(chart.renderers[0].data_source.data)
    assert bars["end"].max() == model.statuses["vessels"].sum()
    assert list(bars["color"]) == [charts.STATUS_COLORS[status] for status in bars["status"]]
    charts.draw_status_by_port(chart, charts.status_by_port(Summary.empty().statuses))
    assert list(chart.y_range.factors) == [charts.NOTHING] and not chart.renderers[0].data_source.data["port"]


def test_selecting_a_row_explains_it(account):
    model = LineupsModel(account)
    merged = model.page_rows[model.page_rows["source_name"].str.contains(";")]
    position = int(merged.index[0])
    model.select_row(position)
    assert model.selected_id == model.page_rows["id"].iloc[position]
    explained = model.detail["explain"]
    assert explained["id"] == model.selected_id
    assert len(explained["records"]) >= 2
    names = {r["feed"] for r in model.detail["eta"]}
    assert names == set(merged["source_name"].iloc[0].split(";"))
    assert all(e["etas"] and e["slip_hours"] is not None for e in model.detail["eta"] if e["first_eta"])
    provenance = provenance_frame(explained).set_index("field")
    assert provenance.loc["vessel_name", "value"] == explained["fields"]["vessel_name"]["value"]
    assert provenance.loc["port_unlocode", "from"].split(" (")[0] in names
    disagreeing = {d["field"] for d in explained["disagreements"]}
    assert set(provenance.index[provenance["others"] != ""]) <= disagreeing
    assert "id" not in provenance.index
    model.select_row(None)
    assert model.selected_id == "" and model.detail is None


def test_the_detail_says_what_the_merge_resolved(account):
    """Issue 19 rule 4: a row that merges a name-only record, or an unspecified
    commodity, says so in the row detail, in words."""
    model = LineupsModel(account)
    result = account.context.service.frame(account.buyer_id, LineupQuery())  # what the buyer can page through
    merged = result[result["source_name"].str.contains(";")]
    kinds: dict[str, list[str]] = {}
    for row_id in merged["id"]:
        model.selected_id = str(row_id)  # what a click on the row does
        lines = resolution_lines(model.detail["explain"])
        for resolution in model.detail["explain"]["resolutions"]:
            kinds.setdefault(resolution["kind"], lines)
            view = detail_view(model.detail)
            notes = [p for p in view.objects if "resolutions-note" in getattr(p, "css_classes", [])]
            assert notes and all(html.escape(line) in notes[0].object for line in lines)
        if len(kinds) == 2:
            break
    assert set(kinds) == {"vessel", "commodity"}, kinds
    assert any(re.fullmatch(r"IMO \d{7} from .+, matched by name .+", line) for line in kinds["vessel"])
    assert any(re.fullmatch(r".+\(Unspecified\) from .+ joined .+", line) for line in kinds["commodity"])


def test_the_download_goes_to_the_explorers_download_of_the_filters_shown(account):
    """The button is a link to the streamed HTTP download of the current filters
    (issue 49 item 5; tests/explorer/test_mount.py downloads it); none while the
    filters select nothing."""
    model = LineupsModel(account)
    model.filters.param.update(port="BRSSZ", commodity=["Soybeans"])
    assert model.download_path == "/explorer/download?port=BRSSZ&commodity=Soybeans"
    model.filters.param.update(date_from=dt.date(2026, 12, 1), date_to=dt.date(2026, 11, 1))
    assert model.error and model.download_path == ""


# ---------------------------------------------------------------- the session
def test_a_revoked_key_ends_the_session_on_the_next_action(account, sessions, demo):
    model = LineupsModel(account)
    before = model.row_count
    with transaction(sessions) as session:
        accounts.revoke_key(session, accounts.find_key(session, demo["api_key"]))
    model.filters.port = "BRSSZ"
    assert account.lost
    assert model.row_count == before  # nothing was read for the lost session


def test_a_suspended_buyer_ends_the_session(account, sessions, demo):
    shares = SharesModel(account, LineupsModel(account).filters)
    with transaction(sessions) as session:
        accounts.set_buyer_status(session, accounts.find_buyer(session, demo["buyer_id"]), "suspended")
    shares.param.trigger("create")
    assert account.lost and shares.url == ""


# ---------------------------------------------------------------- share links
def test_create_list_and_revoke_a_share_link(account, context, sessions):
    lineups = LineupsModel(account)
    shares = SharesModel(account, lineups.filters)
    assert shares.links.empty
    lineups.filters.param.update(port="BRSSZ", commodity=["Soybeans"])
    shares.param.trigger("create")
    assert shares.error == ""
    assert shares.url.startswith(f"{context.base_url}/v1/share/")
    assert shares.formula == f'=IMPORTDATA("{shares.url}")'
    assert shares.created_summary == "Port BRSSZ · commodity Soybeans"
    assert len(shares.links) == 1
    link = shares.links.iloc[0]
    assert link["filters"] == {"commodity": "Soybeans", "port": "BRSSZ"}
    listed = shares.table()
    assert listed[["filters", "last_used", "uses", "status"]].iloc[0].tolist() == [
        "Port BRSSZ · commodity Soybeans", "never", 0, "active",
    ]
    token = shares.url.rsplit("/", 1)[1]
    shares.request_revoke(link["id"])
    assert shares.pending_revoke == link["id"]
    assert shares.pending_summary() == "Port BRSSZ · commodity Soybeans"
    shares.param.trigger("cancel_revoke")
    assert shares.pending_revoke == "" and shares.table()["status"].tolist() == ["active"]
    shares.request_revoke(link["id"])
    shares.param.trigger("confirm_revoke")
    assert shares.pending_revoke == "" and shares.url == ""
    assert shares.table().empty
    shares.show_revoked = True
    assert shares.table()["status"].iloc[0].startswith("revoked ")
    with transaction(sessions) as session, pytest.raises(Unauthorized):
        links.open_link(session, token, context.secrets)


def test_a_link_is_not_created_for_an_invalid_query(account):
    lineups = LineupsModel(account)
    shares = SharesModel(account, lineups.filters)
    lineups.filters.param.update(date_from=dt.date(2026, 12, 1), date_to=dt.date(2026, 11, 1))
    shares.param.trigger("create")
    assert shares.error == api_message({"from": ["2026-12-01"], "to": ["2026-11-01"]})
    assert shares.url == "" and shares.links.empty


def test_another_buyers_link_cannot_be_revoked(account, sessions):
    shares = SharesModel(account, LineupsModel(account).filters)
    with transaction(sessions) as session:
        other = accounts.add_buyer(session, "Other Buyer")
        link, _ = links.create_link(session, other, {}, ("test-secret-with-at-least-32-characters",))
    shares.request_revoke(link.id)
    assert shares.pending_revoke == ""


# ---------------------------------------------------------------- feeds
def test_feeds_with_ratings_status_and_coverage(account, sessions):
    from store.views.coverage import feed_schema
    from store.intake.feeds import find_feed

    model = FeedsModel(account=account)
    assert model.feeds == []  # read when the screen opens
    model.param.trigger("refresh")
    assert {f["name"]: f["subscription_status"] for f in model.feeds} == ENTITLED
    assert [f["name"] for f in model.feeds] == sorted(ENTITLED)
    grains = model.feeds[0]
    assert [p["unlocode"] for p in grains["ports"]] == ["BRSSZ", "BRPNG", "BRRIG", "BRITQ"]
    assert (grains["coverage_rating"], grains["commodity_rating"], grains["commercial_rating"]) == (4.5, 4.0, 3.5)
    coverage = model.coverage()
    assert len(coverage) == len(ENTITLED) * len(RECORD_FIELDS)
    assert coverage["coverage"].between(0, 1).all()
    with transaction(sessions) as session:
        schema = feed_schema(session, find_feed(session, grains["id"]))
    expected = {f["name"]: f["coverage"] for f in schema["fields"]}
    mine = coverage[coverage["feed"] == grains["name"]].set_index("field")["coverage"].to_dict()
    assert mine == expected


# ---------------------------------------------------------------- the app
def test_the_explorer_opens_screens_on_demand(account):
    from explorer.views import Explorer

    explorer = Explorer(account)
    assert explorer.tab == 0 and explorer.feeds.feeds == []
    explorer.tab = 2
    assert len(explorer.feeds.feeds) == len(ENTITLED)
    explorer.lineups.filters.port = "BRSSZ"
    explorer.tab = 1
    explorer.shares.param.trigger("create")
    # The explorer opens on upcoming calls: from today (UTC), not departed (issue 45 item 4).
    assert explorer.shares.created_summary == f"Port BRSSZ · from {dt.datetime.now(dt.timezone.utc).date()} · not departed"
    assert isinstance(explorer.lineups.table(), pd.DataFrame)


# ---------------------------------------------------------------- issue 17
def test_every_sort_order_puts_blanks_last_both_ways(account):
    from explorer.state import SORT_ORDERS
    from tests.pipeline_reference import sorted_rows

    model = LineupsModel(account)
    rows = result_of(model)
    for label, column in SORT_ORDERS.items():
        if not column:
            continue
        for descending in (False, True):
            model.param.update(sort_by=column, descending=descending)
            expected = sorted_rows(rows, column, not descending).head(PAGE_SIZE)
            assert list(model.page_rows["id"]) == list(expected["id"]), (label, descending)
            values = sorted_rows(rows, column, not descending)[column]
            blanks = values.isna().to_numpy()
            assert not blanks[: (~blanks).sum()].any(), (label, descending)  # blanks after every value
    model.param.update(sort_by="quantity", descending=False)
    ordered = sorted_rows(rows, "quantity", True).dropna(subset=["quantity"])
    # Numbers, not text, and within one unit at a time (issue 45 item 5): tonnes first.
    units = ordered["quantity_unit"].astype(object).fillna("").tolist()
    assert units == sorted(units, key=lambda u: ("MT", "BBL", "Units", "").index(u)) and units[0] == "MT"
    for _unit, part in ordered.groupby(ordered["quantity_unit"].astype(object).fillna(""), sort=False):
        quantities = part["quantity"].astype(float).tolist()
        assert quantities == sorted(quantities)


def test_paging_reads_the_page_on_screen(account):
    model = LineupsModel(account)
    assert model.range_text() == f"1–{PAGE_SIZE} of {model.row_count:,}"
    model.param.trigger("next_page")
    assert model.page == 1 and model.range_text().startswith(f"{PAGE_SIZE + 1}–")
    assert list(model.page_rows["id"]) == list(result_of(model)["id"].iloc[PAGE_SIZE : 2 * PAGE_SIZE])
    model.filters.port = "BRSSZ"
    assert model.page == 0  # new filters, first page


def test_the_store_work_runs_off_the_event_loop_and_shows_busy(account, monkeypatch):
    """A slow query keeps the loop free for others, and the model says it is busy."""
    import asyncio
    import threading
    import time

    from explorer import data

    model = LineupsModel(account)
    slow_page, slow_summary = data.page, data.summary
    threads = []

    def slow(read):
        def reading(*args):
            threads.append(threading.current_thread())
            time.sleep(0.5)
            return read(*args)
        return reading

    monkeypatch.setattr(data, "page", slow(slow_page))
    monkeypatch.setattr(data, "summary", slow(slow_summary))

    async def scenario():
        ticks, seen = 0, []
        task = asyncio.ensure_future(model.refresh())
        await asyncio.sleep(0.05)
        assert model.busy and not model.charting  # the rows first…
        while not task.done():
            ticks += 1
            seen.append((model.busy, model.charting))
            await asyncio.sleep(0.01)
        return ticks, seen

    ticks, seen = asyncio.run(scenario())
    assert ticks > 20  # the loop kept turning during both 0.5 s reads
    assert (False, True) in seen  # …then the charts, the rows already on screen
    assert threads and all(thread is not threading.main_thread() for thread in threads)
    assert not model.busy and not model.charting and model.row_count > 0


def test_a_refresh_that_fails_says_so_and_shows_no_old_rows(account, monkeypatch):
    from explorer import data
    from explorer.state import FAILED

    model = LineupsModel(account)
    assert model.row_count > 0

    def broken(*args, **kwargs):
        raise RuntimeError("the store is gone")

    monkeypatch.setattr(data, "page", broken)
    model.filters.port = "BRSSZ"
    assert model.error == FAILED and model.row_count == 0 and model.page_rows.empty
    assert model.weekly.empty and model.statuses.empty  # no old charts either


def test_charts_that_fail_say_so_under_rows_that_did_not(account, monkeypatch):
    from explorer import data
    from explorer.state import CHARTS_FAILED

    model = LineupsModel(account)
    assert not model.weekly.empty

    def broken(*args, **kwargs):
        raise RuntimeError("the totals are gone")

    monkeypatch.setattr(data, "summary", broken)
    model.filters.port = "BRSSZ"
    assert model.error == "" and model.row_count > 0 and set(model.page_rows["port_unlocode"]) == {"BRSSZ"}
    assert model.charts_problem == CHARTS_FAILED and model.weekly.empty and model.statuses.empty
    monkeypatch.undo()
    model.filters.port = "NLRTM"
    assert model.charts_problem == "" and not model.statuses.empty


def test_filters_from_and_to_the_address(account):
    filters = LineupsModel(account).filters
    taxonomy = default_taxonomy()
    ignored = filters.set_args({"port": "brssz", "commodity": "soybeans", "latest": "true", "to": "2026-12-31"}, taxonomy)
    assert ignored == []
    assert filters.url_args() == {"port": "BRSSZ", "to": "2026-12-31", "commodity": "Soybeans", "latest": "true"}
    ignored = filters.set_args({"port": "XXNOP", "from": "tomorrow", "commodity": "coall"}, taxonomy)
    assert len(ignored) == 3 and not any("'" in text or "parameter" in text for text in ignored)
    assert filters.url_args() == {"source": "all"}  # nothing narrows: said explicitly
    filters.reset(dt.date(2026, 11, 24))
    assert filters.url_args() == {"from": "2026-11-24", "status": "expected,anchored,berthed"}


def test_an_address_says_what_of_it_could_not_be_used(account):
    """Issue 45 item 9: `latest=maybe`, a status, merge mode or filter name that is
    none is said in words; the rest of the address applies."""
    filters = LineupsModel(account).filters
    ignored = filters.set_args(
        {"port": "BRSSZ", "latest": "maybe", "status": "Berthed,moored", "merge": "raw", "vessel": "X"}, default_taxonomy(),
    )
    assert ignored == [
        "“vessel” is not a filter",
        "“moored” is not a vessel status (expected, anchored, berthed or departed)",
        "“maybe” is not true or false, so every call is shown, not only the latest",
        "“raw” is not a way of merging rows, so the feeds are merged",
    ]
    assert filters.url_args() == {"port": "BRSSZ", "status": "berthed"}
    assert filters.describe() == "Port Santos (BRSSZ) · status berthed"


def test_the_tables_order_page_and_columns_to_and_from_the_address(account):
    """Issue 45 item 7: `_sort`/`_sort_desc`, `_page` (from 1) and `_col`, as Datasette
    names them; a bad one is said and left out."""
    model = LineupsModel(account, read=False)
    assert model.view_args() == {}
    model.param.update(sort_by="quantity", descending=True, columns=["qty", "vessel", "etd"])
    model._set_page_silently(2)
    assert model.view_args() == {"_sort_desc": "quantity", "_page": "3", "_col": "vessel,qty,etd"}
    params, ignored = LineupsModel.view_params(model.view_args())
    assert params == {"sort_by": "quantity", "descending": True, "page": 2, "columns": ["vessel", "qty", "etd"]}
    assert ignored == []
    params, ignored = LineupsModel.view_params({"_sort": "price", "_page": "zero", "_col": "vessel,colour"})
    assert params == {"columns": ["vessel"]}
    assert ignored == [
        "the table cannot be sorted by “price”, so it is in date order",
        "“zero” is not a page number, so the first page is shown",
        "“colour” is not a column of the table",
    ]


def test_a_model_opens_on_the_page_its_address_names(account):
    """Issue 45 item 7: the first read is of the address's page (the last one when
    the result has fewer), in its order."""
    model = LineupsModel(account, read=False, sort_by="vessel_name", page=1)
    asyncio.run(model.read_first())
    whole = result_of(model)
    assert model.page == 1 and model.row_count == len(whole) > PAGE_SIZE
    from pipeline_reference import sorted_rows

    expected = sorted_rows(whole, "vessel_name", True)["id"].iloc[PAGE_SIZE : 2 * PAGE_SIZE]
    assert list(model.page_rows["id"]) == list(expected)
    model = LineupsModel(account, read=False, page=10_000)
    asyncio.run(model.read_first())
    assert model.page == (model.row_count - 1) // PAGE_SIZE and len(model.page_rows) > 0


def test_the_address_is_read_by_the_apis_rules(account):
    """The page's address is read by the query module's rules, as /v1/lineups reads
    its parameters (issue 48 item 4): enumerations in any case, and a value the API
    would refuse is left out and said, never silently replaced."""
    filters = LineupsModel(account).filters
    ignored = filters.set_args({"port": "brssz", "latest": "maybe", "merge": "BY_SOURCE", "to": "2026-1-5"}, default_taxonomy())
    assert len(ignored) == 2 and not any("'" in text or "parameter" in text for text in ignored)
    assert filters.url_args() == {"port": "BRSSZ", "merge": "by_source"}


def test_ports_and_countries_narrow_to_the_chosen_feed(account):
    filters = LineupsModel(account).filters
    filters.port = "NLRTM"
    filters.source = feed_id(account, "Brazil Grains Lineup")
    assert set(filters.param.port.objects) == {"", "BRSSZ", "BRPNG", "BRRIG", "BRITQ"}
    assert filters.port == "" and list(filters.param.country.objects) == ["", "Brazil"]


def test_messages_are_in_the_buyers_words():
    from explorer.words import problem
    from store.errors import Forbidden

    assert api_message({"from": ["2026-12-01"], "to": ["2026-11-01"]}).startswith("The From date is after the To date")
    assert "Did you mean" in api_message({"commodity": ["soybean"]})
    assert problem(Forbidden("You have no active or trial subscription to this feed")).startswith("You no longer have")


def test_typed_dates():
    from explorer.views.widgets import parse_day

    for text in ("2026-12-31", "31/12/2026", "31.12.2026", "31 Dec 2026", "Dec 31, 2026", " 2026/12/31 "):
        assert parse_day(text) == dt.date(2026, 12, 31), text
    assert parse_day("") is None and parse_day("  ") is None
    with pytest.raises(ValueError):
        parse_day("next tuesday")


def test_likely_duplicates_are_flagged_with_a_reason():
    from store.merging.duplicates import likely_duplicates

    base = {name: None for name in RECORD_FIELDS}
    rows = pd.DataFrame([
        {**base, "id": "a", "port_unlocode": "BRSSZ", "port_name": "Santos", "vessel_name": "MV Star 1", "vessel_imo": "9074729",
         "commodity": "soybeans", "commodity_normalized": "Soybeans", "commodity_normalized_subgroup": "Grains",
         "combined_date": "2026-11-24T10:00:00Z"},
        {**base, "id": "b", "port_unlocode": "BRSSZ", "port_name": "Santos", "vessel_name": "STAR 1", "vessel_imo": None,
         "commodity": "grain", "commodity_normalized": None, "commodity_normalized_subgroup": "Grains",
         "combined_date": "2026-11-26T10:00:00Z"},
        {**base, "id": "c", "port_unlocode": "BRSSZ", "port_name": "Santos", "vessel_name": "STAR 1", "vessel_imo": None,
         "commodity": "soybeans", "commodity_normalized": "Soybeans", "commodity_normalized_subgroup": "Grains",
         "combined_date": "2026-12-20T10:00:00Z"},  # weeks later: another call
    ])
    found = likely_duplicates(rows)
    assert set(found) == {"a", "b"}
    assert found["b"].startswith("possible duplicate of MV Star 1 at Santos")
    assert "IMO missing" in found["b"] and "commodity less specific" in found["b"]


def test_enter_in_a_date_box_reads_a_day_and_never_raises():
    """Panel's text box sets the raw text on Enter; a date box reads it as a day, and
    keeps its day (no traceback in the server log) when the text is no day."""
    from types import SimpleNamespace

    from explorer.views.widgets import DateInput

    box = DateInput(value=dt.date(2026, 11, 1))
    box._process_event(SimpleNamespace(event_name="enter-pressed", value_input="31/12/2026"))
    assert box.value == dt.date(2026, 12, 31)
    box._process_event(SimpleNamespace(event_name="enter-pressed", value_input="next tuesday"))
    assert box.value == dt.date(2026, 12, 31)
    box._process_event(SimpleNamespace(event_name="enter-pressed", value_input=""))
    assert box.value is None


# ---------------------------------------------------------------- a view being built elsewhere
def test_reads_of_a_view_being_built_elsewhere_wait_off_the_explorers_threads(context, identity, sessions, store_settings, demo):
    """A server's explorer reads with `wait=0`: a read of a view that another process
    is building waits on the event loop (`Account.run`, `patiently`), so that more such
    reads than the explorer has threads leave them free for other reads, and all get
    their answer once the view is built."""
    import dataclasses

    from explorer import data
    from explorer.session import Account
    from store.views import builds, upkeep
    from store.views.lineups import Lineups
    from tests.paused_build import paused_build

    account = Account.open(dataclasses.replace(context, service=Lineups(sessions, wait=0)), identity)
    one_feed = account.feeds[0]["id"]
    held, other = LineupQuery(source=one_feed), LineupQuery(port="BRSSZ")
    builds.ensure_buyer(sessions, demo["buyer_id"])  # the views of every feed of the buyer: ready

    async def read(query: LineupQuery) -> int:
        return await account.run(lambda session, buyer: data.count(session, buyer.id, query))

    async def meanwhile() -> list[asyncio.Future]:
        waiting = [asyncio.ensure_future(read(held)) for _ in range(2 * account.context.executor._max_workers)]
        await asyncio.sleep(1)
        assert not any(w.done() for w in waiting)
        assert await asyncio.wait_for(read(other), 30) > 0  # a thread was free for it
        assert not any(w.done() for w in waiting)
        return waiting

    loop = asyncio.new_event_loop()
    try:
        with paused_build(store_settings, upkeep.ViewKey.of("all", [one_feed])) as builder:
            waiting = loop.run_until_complete(meanwhile())
            builder.kill()  # the next read builds the view
            builder.wait(10)
            counts = loop.run_until_complete(asyncio.wait_for(asyncio.gather(*waiting), 60))
    finally:
        loop.close()
    assert counts == [context.service.count(demo["buyer_id"], held)] * len(waiting) and counts[0] > 0


def test_share_links_on_a_locked_store_say_the_store_is_busy(account, sessions, store_settings):
    """Issue 49 item 7: while another process holds SQLite's write lock (an ingest),
    creating or revoking a link says the store is busy and to try again (it gave no
    link and no message: an uncaught OperationalError), changes nothing, and works
    once the lock is free."""
    lineups = LineupsModel(account)
    shares = SharesModel(account, lineups.filters)
    shares.param.trigger("create")
    first = shares.links.iloc[0]["id"]
    writer = sqlite3.connect(sqlite_path(store_settings.db_url), timeout=1)
    writer.execute("BEGIN IMMEDIATE")  # holds the write lock, as an ingest does
    try:
        lineups.filters.port = "BRSSZ"
        shares.param.trigger("create")
        assert "store is busy" in shares.error and "try again" in shares.error and shares.url == ""
        shares.request_revoke(first)
        shares.param.trigger("confirm_revoke")
        assert "not revoked" in shares.error and "store is busy" in shares.error
        assert shares.pending_revoke == first  # the confirmation stays, to try again
    finally:
        writer.rollback()
        writer.close()
    with transaction(sessions) as session:
        listed = links.list_links(session, account.buyer_id)
        assert [(link.id, link.revoked_at) for link in listed] == [(first, None)]
    shares.param.trigger("confirm_revoke")
    assert shares.error == "" and shares.table().empty
    shares.param.trigger("create")
    assert shares.error == "" and shares.url.startswith(f"{account.context.base_url}/v1/share/")


def test_the_detail_says_why_records_are_one_call_and_each_rule_once():
    """Issue 45 item 6: the merge key, the 7-day chain, the agreeing counterparties and
    the rule that broke an updated_at tie; the rule most fields share is said once."""
    from explorer.views.detail import common_rule, provenance_html, provenance_lines, why_one_call

    picked = "the value of the most recently updated record that gives one"
    explained = {
        "merge": "all",
        "records": [
            {"source_id": "b-feed", "source_name": "Bravo", "ref": "B1", "updated_at": "2024-02-15T00:00:00Z"},
            {"source_id": "a-feed", "source_name": "Alpha", "ref": "A9", "updated_at": "2024-02-15T00:00:00Z"},
        ],
        "fields": {
            "vessel_imo": {"value": "9321483", "rule": picked, "supplied_by": []},
            "vessel_name": {"value": "OCEAN STAR", "rule": picked, "supplied_by": []},
            "port_unlocode": {"value": "BRSSZ", "rule": picked, "supplied_by": []},
            "commodity_normalized": {"value": "Soybeans", "rule": picked, "supplied_by": []},
            "receiver": {"value": "Cargill", "rule": picked, "supplied_by": []},
            "created_at": {"value": "2024-02-01T12:00:00Z", "rule": "the earliest creation time of the records", "supplied_by": []},
        },
        "disagreements": [],
        "resolutions": [],
    }
    why = why_one_call(explained)
    assert why[0] == "One call: the same vessel (IMO 9321483), port (BRSSZ) and commodity (Soybeans)."
    assert "within 7 days" in why[1] and "they agree on receiver Cargill" in why[1]
    assert "tie goes to the lower feed id, then the lower record ref, so Alpha record A9 comes first" in why[2]
    lines = provenance_lines(explained)
    assert common_rule(lines) == picked
    table = provenance_html(lines)
    assert table.count(picked) == 1 and table.count("the earliest creation time") == 1
