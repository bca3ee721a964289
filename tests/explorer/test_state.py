"""The explorer's param classes over the demo store: set params, assert params and
the data they derive (issue 6, "Unit tests drive the param classes")."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

from explorer import charts
from explorer.feeds import FeedsModel
from explorer.shares import SharesModel
from explorer.state import TABLE_COLUMNS, LineupsModel
from explorer.views.detail import provenance_frame
from store import accounts, links
from store.db import transaction
from store.errors import Unauthorized, ValidationError
from store.fields import RECORD_FIELDS
from store.query import LineupQuery, parse_query
from store.taxonomy import default_taxonomy

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
    with transaction(context.sessions) as session:
        return context.service.select(session, buyer_id, query).rows


def api_message(args) -> str:
    with pytest.raises(ValidationError) as raised:
        parse_query(args, default_taxonomy().parse_filter)
    return raised.value.message


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
    assert filters.param.commodity.objects[: len(taxonomy.groups())] == taxonomy.groups()


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
        "Port NLRTM · commodity Crude Oil · from 2026-11-01 · latest call per vessel and port only"
    )


# ---------------------------------------------------------------- lineups
def test_the_model_selects_what_the_api_selects(account, context, demo):
    model = LineupsModel(account)
    expected = api_rows(context, demo["buyer_id"], {})
    assert model.error == ""
    assert model.row_count == len(expected) > 0
    assert list(model.selection["id"]) == list(expected["id"])


def test_a_filter_change_reselects_the_rows(account, context, demo):
    model = LineupsModel(account)
    everything = model.row_count
    model.filters.port = "BRSSZ"
    assert 0 < model.row_count < everything
    assert set(model.selection["port_unlocode"]) == {"BRSSZ"}
    assert list(model.selection["id"]) == list(api_rows(context, demo["buyer_id"], {"port": ["BRSSZ"]})["id"])
    model.filters.param.update(commodity=["Soybeans"], latest=True)
    args = {"port": ["BRSSZ"], "commodity": ["Soybeans"], "latest": ["true"]}
    assert list(model.selection["id"]) == list(api_rows(context, demo["buyer_id"], args)["id"])


def test_an_invalid_combination_shows_the_apis_message(account):
    model = LineupsModel(account)
    model.filters.param.update(date_from=dt.date(2026, 12, 1), date_to=dt.date(2026, 11, 1))
    assert model.error == api_message({"from": ["2026-12-01"], "to": ["2026-11-01"]})
    assert model.error.startswith("Invalid parameter 'from'")
    assert model.row_count == 0 and model.selection.empty
    model.filters.date_to = dt.date(2026, 12, 31)
    assert model.error == "" and model.row_count > 0


def test_the_table_shows_the_selected_rows(account):
    model = LineupsModel(account)
    model.filters.port = "NLRTM"
    table = model.table()
    assert tuple(table.columns) == TABLE_COLUMNS
    assert len(table) == model.row_count
    assert list(table["id"]) == list(model.selection["id"])
    assert table["port"].str.endswith("NLRTM").all()
    assert table["eta"].dropna().str.match(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}$").all()
    # A row without a quantity shows an empty cell, never "NaN".
    missing = model.selection["quantity"].isna().to_numpy()
    assert missing.any() and all(v is None for v in table["quantity"][missing])
    assert all(isinstance(v, float) for v in table["quantity"][~missing])


def test_charts_follow_the_filters(account):
    model = LineupsModel(account)
    rows = model.selection
    weekly = model.weekly_quantity()
    tonnes = rows[(rows["quantity_unit"] == "MT") & rows["combined_date"].notna() & rows["quantity"].notna()]
    assert weekly["kt"].sum() == pytest.approx(tonnes["quantity"].sum() / 1000)
    assert set(weekly["week"].map(lambda w: dt.date.fromisoformat(w).weekday())) == {0}
    by_port = model.status_by_port()
    assert by_port["vessels"].sum() == rows.groupby(["port_unlocode", "vessel_status"])["vessel_key"].nunique().sum()
    model.filters.commodity = ["Crude Oil"]
    assert set(model.weekly_quantity()["group"]) <= {"Liquid Bulk"}  # crude is in barrels: no MT rows
    assert set(model.status_by_port()["port"].str[-6:-1]) <= {"USHOU", "USCRP", "NLRTM"}
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
    charts.draw_weekly_quantity(chart, model.weekly_quantity())
    assert set(chart.renderers[0].data_source.data["group"]) == set(model.weekly_quantity()["group"])


def test_the_charts_are_redrawn_in_place(account):
    model = LineupsModel(account)
    chart = charts.status_by_port_chart()
    charts.draw_status_by_port(chart, model.status_by_port())
    ports = list(chart.y_range.factors)
    assert ports == sorted(ports, reverse=True)  # the first port in name order on top
    assert chart.height == max(240, 28 * len(ports) + 90)
    model.filters.port = "NLRTM"
    charts.draw_status_by_port(chart, model.status_by_port())
    assert list(chart.y_range.factors) == ["Rotterdam (NLRTM)"] and chart.height == 240
    bars = pd.DataFrame(chart.renderers[0].data_source.data)
    assert bars["end"].max() == model.status_by_port()["vessels"].sum()
    assert list(bars["color"]) == [charts.STATUS_COLORS[status] for status in bars["status"]]
    charts.draw_status_by_port(chart, charts.status_by_port(model.selection.iloc[:0]))
    assert list(chart.y_range.factors) == [charts.NOTHING] and not chart.renderers[0].data_source.data["port"]


def test_selecting_a_row_explains_it(account):
    model = LineupsModel(account)
    merged = model.selection[model.selection["source_name"].str.contains(";")]
    position = int(merged.index[0])
    model.select_row(position)
    assert model.selected_id == model.selection["id"].iloc[position]
    explained = model.detail["explain"]
    assert explained["id"] == model.selected_id
    assert len(explained["records"]) >= 2
    names = {r["feed"] for r in model.detail["eta"]}
    assert names == set(merged["source_name"].iloc[0].split(";"))
    assert all(e["etas"] and e["slip_hours"] is not None for e in model.detail["eta"] if e["first_eta"])
    provenance = provenance_frame(explained).set_index("field")
    assert provenance.loc["vessel_name", "value"] == explained["fields"]["vessel_name"]["value"]
    assert provenance.loc["port_unlocode", "supplied_by"].split(" (")[0] in names
    disagreeing = {d["field"] for d in explained["disagreements"]}
    assert set(provenance.index[provenance["disagreement"] != ""]) == disagreeing
    assert "id" not in provenance.index
    model.select_row(None)
    assert model.selected_id == "" and model.detail is None


def test_the_download_is_the_whole_result_as_csv(account):
    model = LineupsModel(account)
    model.filters.port = "BRSSZ"
    text = model.csv_file().getvalue().decode("utf-8")
    assert text.startswith("\ufeff" + ",".join(RECORD_FIELDS) + "\r\n")
    lines = text[1:].split("\r\n")
    assert lines[-1] == ""
    assert len(lines) - 2 == model.row_count > 50  # every row, not one page


# ---------------------------------------------------------------- the session
def test_a_revoked_key_ends_the_session_on_the_next_action(account, sessions, demo):
    model = LineupsModel(account)
    before = model.row_count
    with transaction(sessions) as session:
        accounts.revoke_key(session, accounts.find_key(session, demo["api_key"]))
    model.filters.port = "BRSSZ"
    assert account.lost
    assert model.row_count == before  # nothing was read for the lost session
    assert model.csv_file() is None


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
        link, _ = links.create_link(session, other, {}, ("test-secret",))
    shares.request_revoke(link.id)
    assert shares.pending_revoke == ""


# ---------------------------------------------------------------- feeds
def test_feeds_with_ratings_status_and_coverage(account, sessions):
    from store.coverage import feed_schema
    from store.feeds import find_feed

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
    assert explorer.shares.created_summary == "Port BRSSZ"
    assert isinstance(explorer.lineups.table(), pd.DataFrame)
