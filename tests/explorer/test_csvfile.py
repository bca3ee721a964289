"""The CSV text (C9) the API streams, the explorer's download included, and filters in
words: exact text."""

from __future__ import annotations

import pandas as pd

from explorer.words import describe_filters
from store.fields import RECORD_FIELDS
from store.views.csvtext import csv_header, csv_of_columns
from store.views.stored import READ_COLUMNS, arrow_columns

HEADER = ",".join(RECORD_FIELDS)


def row(**values) -> tuple:
    """A row as the views keep it (`READ_COLUMNS`; times as ns since the epoch)."""
    return tuple(values.get(name) for name in READ_COLUMNS)


def test_csv_is_bom_crlf_c1_columns_and_neutralised_formulas():
    rows = [
        row(
            id="a1", source_name="Feed; Other", vessel_name="=HYPERLINK(\"x\")", shipper="+1 Trading",
            receiver="N/A", charterer="  ", quantity=65000.0, dwt=82000, commodity="Soy, beans",
            eta=pd.Timestamp("2026-11-23 14:05:00", tz="UTC").value, operator="@ops", ship_agent="-", berth_terminal="T1",
        ),
        row(id="b2", quantity=1234.5, vessel_name='Say "hi"'),
    ]
    text = (csv_header() + csv_of_columns(arrow_columns(rows))).decode("utf-8")
    empty_after = lambda n: "," * n  # noqa: E731
    first = (
        "a1,,Feed; Other,,,,T1,,\"'=HYPERLINK(\"\"x\"\")\",,82000,,\"Soy, beans\",,,,65000,,"
        "2026-11-23T14:05:00Z,,,,,'+1 Trading,,,'@ops,'-,,"
    )
    second = "b2" + empty_after(8) + '"Say ""hi"""' + empty_after(8) + "1234.5" + empty_after(13)
    assert text == "\ufeff" + HEADER + "\r\n" + first + "\r\n" + second + "\r\n"


def test_an_empty_result_is_the_header_alone():
    assert csv_header() + csv_of_columns(arrow_columns([])) == ("\ufeff" + HEADER + "\r\n").encode("utf-8")


def test_filters_in_words():
    names = {"6f1c0c35-0000-4000-8000-000000000001": "Brazil Grains Lineup"}
    assert describe_filters({}) == "All lineups"
    assert describe_filters({"source": "all", "merge": "all", "latest": "false"}) == "All lineups"
    assert describe_filters(
        {"source": "6f1c0c35-0000-4000-8000-000000000001", "port_name": "san", "to": "2026-12-31", "merge": "by_source"},
        names,
    ) == "Feed Brazil Grains Lineup · port name contains “san” · until 2026-12-31 · one row per feed (not merged)"
    assert describe_filters({"country": "Brazil", "commodity": "Coal,Iron Ore", "from": "2026-11-01", "to": "2026-11-30"}) == (
        "Country Brazil · commodity Coal or Iron Ore · from 2026-11-01 to 2026-11-30"
    )
