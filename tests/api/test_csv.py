"""CSV output (seed 4.1.2, contract C9): exact bytes for hand-made rows, and the
renderer's rules on their own."""

from __future__ import annotations

import csv
import io

import numpy as np
import pandas as pd
import pytest

from api import render
from store.fields import RECORD_FIELDS
from store.views.csvtext import csv_of_columns
from store.views.stored import arrow_columns

HEADER = ",".join(RECORD_FIELDS)


def test_csv_bytes_of_a_tiny_result(tiny_api, tiny):
    params = {"source": tiny["a"], "merge": "by_source"}
    ids = [row["id"] for row in tiny_api.lineups(**params)["data"]]
    response = tiny_api.get("/v1/lineups", params={**params, "format": "csv"})
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "text/csv; charset=utf-8"
    assert "X-Next-Cursor" not in response.headers and "Link" not in response.headers
    a = f"{tiny['a']},Alpha Santos Lineup"
    expected = (
        "\ufeff" + HEADER + "\r\n"
        f"{ids[0]},{a},BRSSZ,Santos,Brazil,'@Berth 1,9321483,MV Ocean Star,Bulk Carrier,82000,load,"
        "soybeans,Soybeans,Dry Bulk,Grains,65000,MT,2024-03-05T06:00:00Z,2024-03-06T12:00:00Z,"
        "2024-03-08T00:00:00Z,2024-03-05T06:00:00Z,expected,\"'=HYPERLINK(\"\"x\"\")\",\"Cargill, Inc.\","
        "Bunge,'+Oldendorff,'-Wilson Sons,2024-02-01T12:00:00Z,2024-02-10T08:00:00Z\r\n"
        f"{ids[1]},{a},BRSSZ,Santos,Brazil,,,Golden Dawn,Tanker,,disch,Diesel,Diesel/Gasoil,Liquid Bulk,"
        "Refined Products,40000.5,MT,2024-03-20T00:00:00Z,,,2024-03-20T00:00:00Z,anchored,Petrobras,"
        "\"Say \"\"hi\"\"\",,,\"Line1\nLine2\",2024-02-01T12:00:00Z,2024-02-11T09:30:00Z\r\n"
        f"{ids[2]},{a},BRSSZ,Santos,Brazil,,9321483,Ocean Star,,,,Soybeans,Soybeans,Dry Bulk,Grains,"
        "1234.25,MT,2024-04-20T00:00:00Z,,,2024-04-20T00:00:00Z,expected,,\"Cargill, Inc.\",,,,"
        "2024-02-01T12:00:00Z,2024-02-20T00:00:00Z\r\n"
        f"{ids[3]},{a},BRPNG,Paranagua,Brazil,,9321483,Ocean Star,,,load,OUTROS,,,,,,,,,,expected,,,,,,"
        "2024-02-01T12:00:00Z,2024-02-12T10:00:00Z\r\n"
    )
    expected_bytes = expected.encode("utf-8")
    # An id may itself begin with "-": then C9 writes it with the leading quote too.
    for row_id in ids:
        if row_id.startswith("-"):
            expected_bytes = expected_bytes.replace(row_id.encode(), b"'" + row_id.encode(), 1)
    assert response.content == expected_bytes
    assert response.content.startswith(b"\xef\xbb\xbf")


@pytest.mark.parametrize("params", [
    {"limit": "60", "port": "BRSSZ", "merge": "by_source"},
    {"limit": "60", "status": "anchored,Berthed", "latest": "true"},  # issue 45 item 4
])
def test_json_and_csv_render_the_same_page(demo_api, params):
    data = demo_api.lineups(**params)["data"]
    text = demo_api.get("/v1/lineups", params={**params, "format": "csv"}).content.decode("utf-8-sig")
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    assert [r["id"].lstrip("'") for r in rows] == [r["id"] for r in data] and data
    for got, want in zip(rows, data):
        for field in RECORD_FIELDS:
            value = want[field]
            cell = got[field]
            if value is None:
                assert cell == ""
            elif field in ("quantity", "dwt"):
                assert float(cell) == value
            else:
                assert cell.lstrip("'") == str(value)


# ---------------------------------------------------------------- the renderer alone
def frame(**columns) -> pd.DataFrame:
    base = {field: [None] for field in RECORD_FIELDS}
    base.update({k: [v] for k, v in columns.items()})
    out = pd.DataFrame(base)
    for field in ("eta", "etb", "etd", "combined_date", "created_at", "updated_at"):
        out[field] = pd.to_datetime(out[field], utc=True)
    out["dwt"] = pd.array(out["dwt"], dtype="Int64")
    out["quantity"] = out["quantity"].astype(float)
    return out


def as_read(frame: pd.DataFrame) -> list[tuple]:
    """The rows of `frame` as the store reads them from the kept views, which the JSON
    renderer takes: C1 fields in order, times as int ns, missing values None (a NaN
    quantity stays NaN)."""
    def kept(value):
        if value is None or value is pd.NA or value is pd.NaT:
            return None
        return value.value if isinstance(value, pd.Timestamp) else value

    return [tuple(kept(v) for v in row) for row in frame[list(RECORD_FIELDS)].astype(object).itertuples(index=False)]


def csv_rows(frame: pd.DataFrame) -> bytes:
    """The CSV text (no header) the product writes for `frame`'s rows as the views
    keep them (`csv_of_columns` of their Arrow columns)."""
    return csv_of_columns(arrow_columns(as_read(frame), RECORD_FIELDS))


def test_formula_starts_are_neutralised_in_text_cells():
    cells = {"=1+1": "'=1+1", "+1": "'+1", "-1": "'-1", "@SUM(A1)": "'@SUM(A1)", "\tx": "'\tx",
             "\rx": "\"'\rx\"", "\x00x": "'\x00x", "a=b": "a=b", "Plain": "Plain"}
    for raw, written in cells.items():
        line = csv_rows(frame(id="x", shipper=raw)).decode("utf-8")
        assert line.split(",")[23] == written or line.count(written) == 1, (raw, line)


def test_numbers_times_and_blanks():
    row = frame(id="r1", dwt=82000, quantity=65000.0, eta="2024-03-05T06:00:00+02:00", vessel_name=" N/A ",
                port_name="tbc", receiver="   ")
    line = csv_rows(row).decode("utf-8").rstrip("\r\n").split(",")
    values = dict(zip(RECORD_FIELDS, line))
    assert values["dwt"] == "82000" and values["quantity"] == "65000"
    assert values["eta"] == "2024-03-05T04:00:00Z"
    assert values["vessel_name"] == values["port_name"] == values["receiver"] == ""
    record = render.records(as_read(row))[0]
    assert record["dwt"] == 82000 and record["quantity"] == 65000.0
    assert record["vessel_name"] is None and record["port_name"] is None and record["receiver"] is None
    assert record["etd"] is None and record["quantity_unit"] is None


def test_json_cells_are_each_rows_own():
    """A page's JSON is converted a column at a time: each row still gets its own
    times, to the second and floored (also before 1970), null where missing, and a
    blank word null in its row while the same text elsewhere stays."""
    cells = [("1969-07-20T20:17:40.5Z", "Vale", 1.5), ("2024-02-29T23:59:59.900Z", "TBC", np.nan),
             ("1969-12-31T23:59:59.500Z", "Vale", None), (None, " n/a ", 7.0), ("2099-12-31T00:00:00Z", "Vale", 0.0)]
    rows = pd.concat([frame(id=f"r{i}", eta=eta, shipper=shipper, quantity=quantity)
                      for i, (eta, shipper, quantity) in enumerate(cells)], ignore_index=True)
    got = render.records(as_read(rows))
    assert [r["eta"] for r in got] == ["1969-07-20T20:17:40Z", "2024-02-29T23:59:59Z", "1969-12-31T23:59:59Z", None,
                                       "2099-12-31T00:00:00Z"]
    assert [r["shipper"] for r in got] == ["Vale", None, "Vale", None, "Vale"]
    assert [r["quantity"] for r in got] == [1.5, None, None, 7.0, 0.0]
    assert [r["id"] for r in got] == [f"r{i}" for i in range(5)] and list(got[0]) == list(RECORD_FIELDS)
    assert render.records([]) == []


def test_quantity_keeps_its_decimals():
    assert csv_rows(frame(id="r", quantity=0.1 + 0.2)).decode().split(",")[16] == "0.30000000000000004"
    assert render.records(as_read(frame(id="r", quantity=np.nan)))[0]["quantity"] is None


def test_rows_are_what_the_csv_module_writes():
    """Cells are quoted once per distinct value; the result must equal csv.writer's."""
    import random

    rng = random.Random(7)
    alphabet = ['a', 'Z', ' ', ',', '"', '\r', '\n', '\r\n', 'ç', '€', ';', "'", '=', '-', '\t', '']
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6))) for _ in range(300)]
    rows = pd.concat([frame(id=f"r{i}", shipper=t, receiver=texts[-i - 1]) for i, t in enumerate(texts)], ignore_index=True)
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, lineterminator="\r\n")
    for record in render.records(as_read(rows)):
        cells = []
        for field in RECORD_FIELDS:
            value = record[field]
            cells.append("" if value is None else render.neutralise(value) if isinstance(value, str) and field not in (
                "eta", "etb", "etd", "combined_date", "created_at", "updated_at") else value)
        writer.writerow(cells)
    assert csv_rows(rows) == buffer.getvalue().encode("utf-8")


def test_numbers_times_and_ids_are_what_the_csv_module_writes():
    """Every kind of cell at once, against csv.writer and C1/C9's rules spelled out
    here: times to the second (before 1970 too), whole quantities as integers
    (exactly, however large), others in their shortest text, NaN and missing values
    empty, blank words empty, ids and text starting with "-" neutralised."""
    import random

    rng = random.Random(11)
    alphabet = ['a', 'Z', ' ', ',', '"', '\n', 'ç', "'", '=', '-', '+', '@', '\t', '']
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 5))) for _ in range(200)]
    texts += ["N/A", " tbc ", "TBN", "ok"]
    stamps = [None, "2024-03-05T06:00:00.900Z", "1969-12-31T23:59:59.5Z", "2099-01-01T00:00:00Z"]
    numbers = [None, 0.0, 65000.0, 40000.5, 0.1 + 0.2, 1e300, -7.0, float("nan")]
    rows = pd.concat([
        frame(id=("-r" if i % 7 == 0 else "r") + str(i), shipper=t, vessel_name=texts[-i - 1], eta=stamps[i % 4],
              created_at=stamps[(i + 1) % 4], dwt=None if i % 3 == 0 else i * 1000, quantity=numbers[i % len(numbers)],
              quantity_unit="MT" if i % 2 else None)
        for i, t in enumerate(texts)
    ], ignore_index=True)

    def cell(field: str, value):
        if value is None:
            return ""
        if field == "quantity":
            return str(int(value)) if value.is_integer() else repr(value)
        if field == "dwt" or field in ("eta", "etb", "etd", "combined_date", "created_at", "updated_at"):
            return str(value)
        return render.neutralise(value)

    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, lineterminator="\r\n")
    for record in render.records(as_read(rows)):
        writer.writerow([cell(field, record[field]) for field in RECORD_FIELDS])
    assert csv_rows(rows) == buffer.getvalue().encode("utf-8")
    assert csv_rows(rows.iloc[:1]) == buffer.getvalue().encode("utf-8").split(b"\r\n", 1)[0] + b"\r\n"
    assert csv_rows(rows.iloc[:0]) == b""
    assert b"'-r0," in csv_rows(rows) and b",1969-12-31T23:59:59Z," in csv_rows(rows)


def test_a_streamed_export_is_the_whole_result_in_chunks(make_tiny_api, tiny):
    """The streaming writer share links use (blocks of the rows as read, here of two
    rows), mounted through `extra_routes`."""
    from api.base import BaseHandler

    seen = {}

    class ExportHandler(BaseHandler):
        async def get(self) -> None:
            from api.handlers import parse

            query = parse({"source": [tiny["a"]], "merge": ["by_source"]})[0]
            seen["rows"] = await self.blocking(self.deps.lineups.frame, self.buyer_id, query)
            blocks = self.deps.lineups.csv_blocks(self.buyer_id, query, size=2)
            await self.stream_csv(lambda: next(blocks, None))

    api = make_tiny_api(tiny["key"], extra_routes=lambda deps: [(r"/test/export", ExportHandler, {"deps": deps})])
    response = api.get("/test/export")
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"] == "text/csv; charset=utf-8"
    assert response.content == render.csv_header() + csv_rows(seen["rows"])
    assert response.content.count(b"\r\n") == 1 + 4
