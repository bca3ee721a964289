"""Pages of the kept views walked with cursors (C3, C4) against the literal pipeline,
on both back ends: every row once, in C3 order, whatever the page size, for the
filters whose SQL takes a path of its own (a commodity group read leaf by leaf,
`latest` beside other filters, dates, both merge modes)."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest
from pipeline_reference import select as reference_select

from store.access import accounts
from store.database.db import transaction
from store.intake.demo import load_demo
from store.merging import merge
from store.views.records import load_records
from store.reference.taxonomy import default_taxonomy
from store.views import sql
from store.views.lineups import Lineups
from store.query import parse_query

ANCHOR = dt.date(2026, 11, 23)
QUERIES = (
    {"commodity": "Dry Bulk"},
    {"commodity": "Liquid Bulk", "merge": "by_source"},
    {"commodity": "Grains,Coal", "latest": "true"},
    {"commodity": "Dry Bulk", "from": "2026-11-20", "to": "2026-12-05"},
    {"commodity": "Liquid Bulk", "latest": "true", "from": "2026-11-25", "merge": "by_source"},
    {"commodity": "Dry Bulk", "port": "BRSSZ"},
    {"commodity": "Gas", "country": "United States", "latest": "true"},
    {"commodity": "General Cargo"},
    {"port": "BRSSZ", "latest": "true", "from": "2026-11-22"},
    {"from": "2026-11-25"},
    {"latest": "true", "from": "2026-11-25"},
    {"latest": "true", "from": "2026-11-25", "merge": "by_source"},
    # Issue 45 item 4: the status filter on merged rows, before `latest` (C3).
    {"status": "expected,anchored,berthed", "from": "2026-11-23"},
    {"status": "expected,anchored,berthed", "from": "2026-11-23", "latest": "true"},
    {"status": "departed", "latest": "true"},
    {"status": "berthed", "commodity": "Dry Bulk", "latest": "true", "merge": "by_source"},
    {"status": "Anchored,BERTHED", "port": "BRSSZ", "latest": "true"},
    {},
)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def store(request, tmp_path_factory):
    """One demo store per back end for the module: `(sessions, demo)`."""
    from store.database.db import create_schema, engine_for, make_sessionmaker
    from tests.conftest import fresh_store_settings

    with fresh_store_settings(request.param, tmp_path_factory.mktemp("pages")) as settings:
        engine = engine_for(settings)
        create_schema(engine)
        sessions = make_sessionmaker(engine)
        with transaction(sessions) as session:
            demo = load_demo(session, 600, seed=3, anchor=ANCHOR)
        yield sessions, demo
        engine.dispose()


def walk(lineups: Lineups, buyer_id: str, query, limit: int) -> pd.DataFrame:
    """Every page of `query`, each read after the last one's position."""
    pages, after = [], None
    while True:
        page = lineups.page(buyer_id, query, after, limit)
        pages.append(page.rows)
        if page.next is None:
            return pd.concat(pages, ignore_index=True)
        after = page.next


@pytest.mark.parametrize("sparse_rows", [0, sql.SPARSE_ROWS], ids=["walked-in-order", "read-by-commodity"])
@pytest.mark.parametrize("params", QUERIES, ids=lambda p: "&".join(f"{k}={v}" for k, v in p.items()) or "all")
def test_pages_walk_the_whole_result_once_in_order(store, params, sparse_rows, monkeypatch):
    """Both ways a page with a commodity filter is read: in C3 order by the planner's
    index (`SPARSE_ROWS` 0: no filter counts as sparse), and by the commodity's
    index, sorted (the demo store is small: every commodity filter is sparse)."""
    monkeypatch.setattr(sql, "SPARSE_ROWS", sparse_rows)
    sessions, demo = store
    query = parse_query({k: [v] for k, v in params.items()}, default_taxonomy().parse_filter)[0]
    with transaction(sessions) as session:
        records = load_records(session, [f.id for f in accounts.entitled_feeds(session, demo["buyer_id"])])
    expected = list(reference_select(merge.merge(records, query.merge), query)["id"])
    lineups = Lineups(sessions)
    for limit in (9, 100):
        assert list(walk(lineups, demo["buyer_id"], query, limit)["id"]) == expected, limit
    assert lineups.count(demo["buyer_id"], query) == len(expected)
    assert expected or params == {"commodity": "General Cargo"}, "a query that keeps nothing tests little"


#: Questions of one shape (the same filters, other values), each pair's second asked
#: after its first: a page's statement is built once per shape and run with each
#: page's own values (`sql.page_statement`), so a value the first left behind shows.
SAME_SHAPE = (
    ({"port": "BRSSZ"}, {"port": "USHOU"}),
    ({"country": "Brazil", "latest": "true"}, {"country": "Argentina", "latest": "true"}),
    ({"port_name": "santos"}, {"port_name": "rio"}),
    ({"commodity": "Grains"}, {"commodity": "Coal,Iron Ore"}),
    ({"from": "2026-11-20", "to": "2026-11-24"}, {"from": "2026-11-28", "to": "2026-12-05"}),
    ({"port": "BRSSZ", "commodity": "Dry Bulk", "merge": "by_source"}, {"port": "BRPNG", "commodity": "Grains", "merge": "by_source"}),
    ({"source": 0, "merge": "by_source"}, {"source": 1, "merge": "by_source"}),
    ({"status": "berthed"}, {"status": "expected,anchored,departed"}),
)


@pytest.mark.parametrize("first, second", SAME_SHAPE, ids=lambda p: "&".join(f"{k}={v}" for k, v in p.items()))
def test_a_question_gets_its_own_values_in_a_shape_asked_before(store, first, second):
    sessions, demo = store
    with transaction(sessions) as session:
        feeds = [f.id for f in accounts.entitled_feeds(session, demo["buyer_id"])]
        records = {source: load_records(session, [feeds[source]] if source is not None else feeds)
                   for source in (None, *(params.get("source") for params in (first, second)))}
    lineups = Lineups(sessions)
    sql._PAGES.clear()
    expected = []
    for params, limit in ((first, 7), (second, 5)):
        visible = records[params.get("source")]
        params = {k: feeds[v] if k == "source" else v for k, v in params.items()}
        query = parse_query({k: [v] for k, v in params.items()}, default_taxonomy().parse_filter)[0]
        expected.append(list(reference_select(merge.merge(visible, query.merge), query)["id"])[:limit])
        assert list(lineups.page(demo["buyer_id"], query, None, limit).rows["id"]) == expected[-1], params
    assert len(sql._PAGES) == 1, "one shape"
    assert expected[0] and expected[1] and set(expected[0]) != set(expected[1]), "the two answers must differ"
