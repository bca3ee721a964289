"""The /v1/lineups query: parameters (C5) and the pipeline filters → latest → order →
pages (C3, C4)."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest
from merge_records import FEED_A, FEED_B, day, frame, record

from store.errors import ValidationError
from store.merging.merge import merge
from pipeline_reference import apply_filters, apply_latest, page, position_of, run, select, sort_rows
from store.ids import canonical_uuid, is_uuid
from store.query import FILTERS, LineupQuery, parse_query, read_filters

TAXONOMY = {"thermal coal": "Thermal Coal", "coal": "Coal", "dry bulk": "Dry Bulk", "soybeans": "Soybeans"}


def commodity_parser(value: str) -> tuple[str, ...]:
    """A stand-in for the taxonomy's parse_filter."""
    names = []
    for item in value.split(","):
        name = TAXONOMY.get(item.strip().lower())
        if name is None:
            raise ValidationError.parameter("commodity", f"{item!r} is not a commodity name")
        names.append(name)
    return tuple(names)


def parse(**params):
    return parse_query({k: [v] for k, v in params.items()}, commodity_parser)


def refs(rows: pd.DataFrame) -> list[str]:
    """Each row named by its first record's ref (tests give one record per row)."""
    return sorted(rows["berth_terminal"])


@pytest.fixture
def merged() -> pd.DataFrame:
    """Five single-record rows (berth_terminal names them) over two ports."""
    rotterdam = dict(port_unlocode="NLRTM", port_name="Rotterdam", country_name="Netherlands")
    antwerp = dict(port_unlocode="BEANR", port_name="Antwerp-Bruges", country_name="Belgium")
    soy = dict(
        commodity_key="raw:soybeans",
        commodity="soja",
        commodity_normalized=None,
        commodity_normalized_subgroup=None,
        commodity_normalized_group=None,
    )
    return merge(
        frame(
            record("r1", berth_terminal="coal-rtm", eta=day(0), etd=day(4), **rotterdam),
            record("r2", berth_terminal="coal-anr", eta=day(10), vessel_key="IMO9321483", **antwerp),
            record("r3", berth_terminal="soy-rtm", eta=day(20), vessel_key="IMO9321483", **rotterdam, **soy),
            record("r4", berth_terminal="nodate", eta=None, vessel_key="IMO9999999", **rotterdam),
            record("r5", source_id=FEED_B, berth_terminal="late-rtm", eta=day(40), **rotterdam),
        )
    )


# Filters (C3) -------------------------------------------------------------------------


def test_port_filter_is_exact_and_ignores_case(merged):
    assert refs(apply_filters(merged, LineupQuery(port="BEANR"))) == ["coal-anr"]
    assert refs(apply_filters(merged, LineupQuery(port="beanr"))) == ["coal-anr"]


def test_country_filter_is_exact_and_ignores_case(merged):
    assert refs(apply_filters(merged, LineupQuery(country="belgium"))) == ["coal-anr"]
    assert refs(apply_filters(merged, LineupQuery(country="Belg"))) == []


def test_port_name_filter_is_a_substring_ignoring_case(merged):
    assert refs(apply_filters(merged, LineupQuery(port_name="BRUG"))) == ["coal-anr"]
    assert len(apply_filters(merged, LineupQuery(port_name="otter"))) == 4


@pytest.mark.parametrize("name", ["Thermal Coal", "coal", "DRY BULK"])
def test_commodity_filter_matches_leaf_subgroup_or_group(merged, name):
    rows = apply_filters(merged, LineupQuery(commodity=(name,)))
    assert refs(rows) == ["coal-anr", "coal-rtm", "late-rtm", "nodate"]


def test_commodity_filter_never_matches_unresolved_rows(merged):
    assert refs(apply_filters(merged, LineupQuery(commodity=("Soybeans",)))) == []
    assert len(apply_filters(merged, LineupQuery(commodity=("Soybeans", "Coal")))) == 4


def test_date_filter_matches_rows_whose_span_overlaps_the_days(merged):
    # coal-rtm spans day 0 06:00 to day 4 06:00.
    start = dt.date(2024, 3, 1)
    between = lambda a, b: refs(apply_filters(merged, LineupQuery(date_from=a, date_to=b)))  # noqa: E731
    assert between(start + dt.timedelta(days=4), start + dt.timedelta(days=4)) == ["coal-rtm"]
    assert between(start + dt.timedelta(days=5), start + dt.timedelta(days=9)) == []
    assert between(None, start) == ["coal-rtm"]
    assert between(start + dt.timedelta(days=40), None) == ["late-rtm"]


def test_date_filter_to_is_inclusive_up_to_midnight():
    rows = merge(
        frame(
            record("a", berth_terminal="last second", eta="2024-03-05T23:59:59Z"),
            record("b", berth_terminal="next day", eta="2024-03-06T00:00:00Z", vessel_key="IMO9321483"),
        )
    )
    assert refs(apply_filters(rows, LineupQuery(date_to=dt.date(2024, 3, 5)))) == ["last second"]
    assert refs(apply_filters(rows, LineupQuery(date_from=dt.date(2024, 3, 6)))) == ["next day"]


def test_rows_without_a_date_never_match_a_date_filter(merged):
    rows = apply_filters(merged, LineupQuery(date_from=dt.date(2000, 1, 1), date_to=dt.date(2100, 1, 1)))
    assert "nodate" not in refs(rows) and len(rows) == 4


# latest (C3) --------------------------------------------------------------------------


def test_latest_keeps_the_latest_row_per_vessel_and_port(merged):
    assert refs(apply_latest(merged)) == ["coal-anr", "late-rtm", "nodate", "soy-rtm"]


def test_latest_prefers_any_date_over_none():
    rows = merge(
        frame(record("a", berth_terminal="dated", eta=day(1)), record("b", berth_terminal="none", eta=None))
    )
    assert refs(apply_latest(rows)) == ["dated"]


def test_latest_ties_go_to_the_latest_update_then_the_lowest_id():
    same = dict(eta=day(1), updated_at=day(-1))
    rows = merge(
        frame(
            record("a", berth_terminal="coal", **same),
            record("b", berth_terminal="soy", commodity_key="raw:soy", **same),
            record("c", berth_terminal="ore", commodity_key="raw:ore", eta=day(1), updated_at=day(-3)),
        )
    )
    kept = apply_latest(rows)
    assert len(kept) == 1
    assert kept["id"].iloc[0] == min(rows.loc[rows["berth_terminal"] != "ore", "id"])


# Order and pages (C3, C4) -------------------------------------------------------------


def test_rows_are_ordered_by_combined_date_then_id_with_dateless_rows_last():
    rows = merge(
        frame(
            *(record(f"n{i}", eta=None, vessel_key=f"IMO900000{i}") for i in range(3)),
            *(record(f"d{i}", eta=day(2), vessel_key=f"IMO910000{i}") for i in range(3)),
            record("early", eta=day(1)),
        )
    )
    ordered = sort_rows(rows)
    assert ordered["combined_date"].iloc[0] == pd.Timestamp(day(1))
    tied, dateless = ordered.iloc[1:4], ordered.iloc[4:]
    assert list(tied["id"]) == sorted(tied["id"]) and tied["combined_date"].notna().all()
    assert list(dateless["id"]) == sorted(dateless["id"]) and dateless["combined_date"].isna().all()
    assert list(ordered.index) == list(range(7))


@pytest.fixture
def many() -> pd.DataFrame:
    """37 rows: some share a date, some have none."""
    records = [
        record(f"r{i}", vessel_key=f"IMO9{i:06d}", eta=None if i % 7 == 0 else day(i % 5, hour=i % 3))
        for i in range(37)
    ]
    return merge(frame(*records))


@pytest.mark.parametrize("limits", [[1], [5], [36], [37], [500], [3, 10, 1, 7, 100]])
def test_walking_all_pages_returns_every_row_once_in_order(many, limits):
    ordered = select(many, LineupQuery())
    seen, after, step = [], None, 0
    while True:
        chunk, after = page(ordered, after, limits[step % len(limits)])
        seen += list(chunk["id"])
        step += 1
        if after is None:
            break
    assert seen == list(ordered["id"])
    assert sorted(seen) == sorted(many["id"])


def test_a_position_stays_valid_when_rows_change(many):
    ordered = select(many, LineupQuery())
    first, after = page(ordered, None, 10)
    shrunk = select(many[~many["id"].isin(first["id"].iloc[-3:])], LineupQuery())
    rest, _ = page(shrunk, after, 500)
    assert list(rest["id"]) == list(ordered["id"].iloc[10:])


def test_positions_are_json_values(many):
    ordered = select(many, LineupQuery())
    _, after = page(ordered, None, 3)
    assert after == position_of(ordered.iloc[2])
    assert isinstance(after[0], int) and isinstance(after[1], str)
    dateless = position_of(ordered.iloc[-1])
    assert dateless[0] is None


def test_last_page_has_no_next_position(many):
    assert page(select(many, LineupQuery()), None, 37)[1] is None
    chunk, after = page(select(many, LineupQuery()), [None, "~"], 5)  # after every row
    assert chunk.empty and after is None


@pytest.mark.parametrize("bad", [["x"], [1, 2], "abc", [True, "id"], [1.5, "id"]])
def test_a_malformed_position_is_refused(many, bad):
    with pytest.raises(ValidationError) as error:
        page(select(many, LineupQuery()), bad, 5)
    assert error.value.details["parameter"] == "cursor"


def test_run_filters_then_latest_then_sorts_then_pages(merged):
    query = LineupQuery(port="NLRTM", latest=True)
    chunk, after = run(merged, query, None, 2)
    assert list(chunk["berth_terminal"]) == ["soy-rtm", "late-rtm"] and after is not None
    chunk, after = run(merged, query, after, 2)
    assert list(chunk["berth_terminal"]) == ["nodate"] and after is None


# Parameters (C5) ----------------------------------------------------------------------


def test_defaults():
    query, limit, cursor = parse_query({}, commodity_parser)
    assert query == LineupQuery() and limit == 100 and cursor is None


def test_every_parameter_is_read():
    query, limit, cursor = parse(
        source=FEED_A.upper(),
        port="nlrtm",
        country="Netherlands",
        port_name="rotter",
        **{"from": "2024-03-01", "to": "2024-03-31"},
        latest="TRUE",
        commodity="coal, dry bulk",
        status="Berthed,expected",
        merge="by_source",
        limit="500",
        cursor="abc.def",
        format="csv",
    )
    assert query == LineupQuery(
        source=FEED_A,
        port="NLRTM",
        country="Netherlands",
        port_name="rotter",
        date_from=dt.date(2024, 3, 1),
        date_to=dt.date(2024, 3, 31),
        latest=True,
        commodity=("Coal", "Dry Bulk"),
        status=("expected", "berthed"),
        merge="by_source",
        format="csv",
    )
    assert (limit, cursor) == (500, "abc.def")


@pytest.mark.parametrize(
    ("params", "parameter"),
    [
        ({"sort": "eta"}, "sort"),
        ({"source": "feed-a"}, "source"),
        ({"port": "NLRT"}, "port"),
        ({"port": "NL-RTM"}, "port"),
        ({"port": "1LRTM"}, "port"),
        ({"country": "  "}, "country"),
        ({"from": "2024-3-1"}, "from"),
        ({"from": "2024-02-30"}, "from"),
        ({"to": "01/03/2024"}, "to"),
        ({"from": "2024-03-02", "to": "2024-03-01"}, "from"),
        ({"latest": "yes"}, "latest"),
        ({"latest": "1"}, "latest"),
        ({"merge": "none"}, "merge"),
        ({"format": "xml"}, "format"),
        ({"limit": "0"}, "limit"),
        ({"limit": "501"}, "limit"),
        ({"limit": "-1"}, "limit"),
        ({"limit": "10.0"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"limit": ""}, "limit"),
        ({"commodity": "unobtainium"}, "commodity"),
        ({"status": "moored"}, "status"),
        ({"status": "expected,"}, "status"),
        ({"status": "expected;berthed"}, "status"),
    ],
)
def test_bad_parameters_are_refused_naming_the_parameter(params, parameter):
    with pytest.raises(ValidationError) as error:
        parse(**params)
    assert error.value.status == 400
    assert error.value.details["parameter"] == parameter
    assert error.value.details["reason"]


@pytest.mark.parametrize("params", [
    {"merge": "ALL"}, {"merge": "By_Source"}, {"format": "CSV"}, {"format": "Json"}, {"source": "ALL"},
    {"latest": "TRUE"}, {"source": "All", "merge": "BY_SOURCE", "format": "CSV", "latest": "False"},
])
def test_enumerations_are_read_in_any_case_as_one_query(params):
    """Issue 18.9: every enumeration (latest, format, merge, source=all) in any case is
    the same query, with the same canonical form, so that cursors bind equally."""
    lowered = {name: value.lower() for name, value in params.items()}
    assert parse(**params) == parse(**lowered)
    assert parse(**params)[0].key() == parse(**lowered)[0].key()


@pytest.mark.parametrize("value", ["sailed", "expected,,berthed", "EXPECTED,moored"])
def test_an_unknown_vessel_status_is_refused_with_the_allowed_ones(value):
    """Issue 45 item 4, C5: the error names the parameter and lists the seed's values (C1)."""
    with pytest.raises(ValidationError) as error:
        parse(status=value)
    assert error.value.details["parameter"] == "status"
    assert error.value.details["allowed"] == ["expected", "anchored", "berthed", "departed"]
    assert "expected, anchored, berthed, departed" in error.value.details["reason"]


def test_vessel_statuses_are_read_in_any_case_and_order_as_one_query():
    """Issue 45 item 4: `status` takes the seed's spelling in any case, spaces around
    names, repeats and any order, and keeps one spelling (so cursors and links bind
    equally, C4, C8)."""
    first = parse(status="berthed, EXPECTED,Anchored,expected")[0]
    second = parse(status="expected,anchored,berthed")[0]
    assert first == second and first.key() == second.key()
    assert first.status == ("expected", "anchored", "berthed")
    assert first.to_params() == {"status": "expected,anchored,berthed"}
    assert first.key() != parse(status="expected,anchored")[0].key() != LineupQuery().key()


def test_a_repeated_parameter_is_refused():
    with pytest.raises(ValidationError) as error:
        parse_query({"port": ["NLRTM", "BEANR"]}, commodity_parser)
    assert error.value.details["parameter"] == "port"


def test_the_limit_is_never_clamped():
    assert parse(limit="1")[1] == 1 and parse(limit="500")[1] == 500
    with pytest.raises(ValidationError):
        parse(limit="1000")


def test_from_equal_to_to_is_one_day():
    query = parse(**{"from": "2024-03-01", "to": "2024-03-01"})[0]
    assert query.date_from == query.date_to == dt.date(2024, 3, 1)


def test_byte_values_are_read_as_utf8():
    query = parse_query({"port_name": ["São".encode()]}, commodity_parser)[0]
    assert query.port_name == "São"


# canonical form -----------------------------------------------------------------------


def test_equal_queries_have_one_canonical_form():
    first = parse(port="nlrtm", commodity="dry bulk,coal")[0]
    second = parse(port="NLRTM", commodity="coal,dry bulk,coal")[0]
    assert first == second and first.key() == second.key()
    assert first.canonical()["commodity"] == ["Coal", "Dry Bulk"]
    assert first.canonical()["source"] == "all"


def test_other_filters_mode_or_format_change_the_canonical_form():
    base = LineupQuery()
    for other in (LineupQuery(merge="by_source"), LineupQuery(format="csv"), LineupQuery(latest=True)):
        assert other.key() != base.key()


def test_to_params_reads_back_to_the_same_query():
    query = parse(source=FEED_B, port="BEANR", latest="true", commodity="coal", status="departed", **{"from": "2024-01-02"})[0]
    again = parse_query({k: [v] for k, v in query.to_params().items()}, commodity_parser)[0]
    assert again == query
    assert LineupQuery().to_params() == {}


def test_a_query_names_its_csv_file_after_its_filters():
    """Issue 45 item 10: a download is named after what it holds."""
    from store.query import file_name

    day = dt.date(2026, 12, 4)
    query = parse(port="nlrtm", commodity="coal", status="berthed", latest="true", **{"from": "2026-12-04"})[0]
    assert file_name(query, day) == "lineups-nlrtm-from-2026-12-04-latest-coal-berthed-20261204.csv"
    assert file_name(parse(port="NLRTM")[0], day) == "lineups-nlrtm-20261204.csv"
    assert file_name(LineupQuery(), day) == "lineups-all-20261204.csv"
    assert file_name(parse(port_name='a"b\\c/<x>')[0], day) == "lineups-a-b-c-x-20261204.csv"


def test_an_address_is_read_by_the_same_rules_each_filter_on_its_own():
    """`read_filters` (the explorer's address) applies what `parse_query` accepts and
    leaves out, with the API's error, each value that breaks its rule."""
    good = {"source": FEED_B.upper(), "port": "beanr", "latest": "TRUE", "commodity": "coal", "from": "2024-01-02"}
    query, errors = read_filters(good, commodity_parser)
    assert errors == [] and query == parse(**good)[0]
    bad = {**good, "port": "Antwerp", "to": "tomorrow", "merge": "some", "limit": "9", "cursor": "x", "colour": "red"}
    query, errors = read_filters(bad, commodity_parser)
    assert [error.details["parameter"] for error in errors] == ["to", "port", "merge"]
    for error in errors:  # the API's answer for the same value
        with pytest.raises(ValidationError) as refused:
            parse(**{error.details["parameter"]: bad[error.details["parameter"]]})
        assert refused.value.body() == error.body()
    assert query == LineupQuery(source=FEED_B, latest=True, commodity=("Coal",), date_from=dt.date(2024, 1, 2))
    assert read_filters({"port": " ", "from": "2024-02-01", "to": "2024-01-01"}, commodity_parser)[1] == []
    assert set(FILTERS) == {"source", "port", "country", "port_name", "from", "to", "latest", "commodity", "status", "merge"}


def test_one_uuid_rule_for_every_id():
    """C5/C11: 8-4-4-4-12 hex digits in any case, kept in lower case; other spellings
    that Python's uuid module reads are no id."""
    assert canonical_uuid(FEED_B.upper()) == FEED_B.lower() and is_uuid(FEED_B)
    for text in ("{" + FEED_B + "}", "urn:uuid:" + FEED_B, FEED_B.replace("-", ""), FEED_B + " ", "", None, 7):
        assert canonical_uuid(text) is None and not is_uuid(text)
        with pytest.raises(ValidationError):
            parse(source=text if isinstance(text, str) and text else "x")
