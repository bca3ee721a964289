"""A real spreadsheet imports a share link (C8, C9): LibreOffice Calc, headless.

LibreOffice fetches the link over HTTP with no header at all (it sends OPTIONS, HEAD
and GET, as spreadsheet clients do), imports the CSV as UTF-8 and saves a workbook,
which the test then reads cell by cell. Needs Debian's `libreoffice-calc-nogui`
(`.ci/run` installs it); outside CI its absence skips the test.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from store.database.db import transaction
from store.fields import RECORD_FIELDS
from store.database.schema import Feed
from tests.api.test_share import make_link
from tests.api.tiny_data import add_records
from tests.conftest import need_service


@pytest.fixture
def soffice() -> str:
    path = shutil.which("soffice")
    if path is None:
        need_service("LibreOffice (soffice)", FileNotFoundError("soffice is not on PATH"))
    return path


def import_into_calc(soffice: str, url: str, folder) -> "openpyxl.Workbook":  # noqa: F821
    """LibreOffice opens `url`, imports it as UTF-8 CSV and saves an .xlsx workbook."""
    import openpyxl

    env = {**os.environ, "HOME": str(folder)}  # LibreOffice needs a writable profile
    result = subprocess.run(
        [soffice, "--headless", "--infilter=CSV:44,34,76,1", "--convert-to", "xlsx:Calc MS Excel 2007 XML",
         "--outdir", str(folder / "out"), url],
        env=env, capture_output=True, text=True, timeout=120,
    )
    saved = list((folder / "out").glob("*.xlsx")) if (folder / "out").exists() else []
    # soffice exits 0 even when it could not load the source: the file is the proof.
    assert saved, f"LibreOffice saved nothing: {result.stdout} {result.stderr}"
    return openpyxl.load_workbook(saved[0])


@pytest.mark.parametrize("backend", ["sqlite"])  # the spreadsheet reads HTTP; one store suffices
def test_libreoffice_imports_a_link_with_no_header(soffice, make_api, fresh_tiny, tmp_path):
    api = make_api(fresh_tiny["key"])
    with transaction(api.sessions) as session:
        feed = session.get(Feed, fresh_tiny["b"])
        add_records(session, feed, [{
            "ref": "B9", "port_unlocode": "BRSSZ", "vessel_imo": "9074729", "vessel_name": "Açaí Star",
            "commodity": "sugar", "quantity": "45000.5", "quantity_unit": "MT", "dwt": "61000",
            "eta": "2024-05-02T08:00:00Z", "receiver": "Companhia Açucareira São João",
            "shipper": "@SUM(A1:A9)", "charterer": "=1+1",
        }])
    _, path = make_link(api, fresh_tiny["buyer_id"], port="BRSSZ")
    expected = api.get(path, key=None).content.decode("utf-8-sig").count("\r\n") - 1

    sheet = import_into_calc(soffice, api.base_url + path + ".csv", tmp_path).active
    rows = list(sheet.iter_rows(values_only=True))
    assert list(rows[0]) == list(RECORD_FIELDS)
    assert len(rows) - 1 == expected
    records = [dict(zip(rows[0], row)) for row in rows[1:]]
    mine = next(r for r in records if r["receiver"] == "Companhia Açucareira São João")
    assert mine["vessel_name"] == "Açaí Star"  # accents intact through UTF-8
    assert mine["quantity"] == 45000.5 and mine["dwt"] == 61000  # numbers as numbers
    # Formula-like cells arrive as text, never as formulas (C9).
    assert mine["shipper"] == "'@SUM(A1:A9)" and mine["charterer"] == "'=1+1"
    cells = [c for row in sheet.iter_rows() for c in row]
    assert not [c.coordinate for c in cells if c.data_type == "f"], "a cell became a formula"
    assert any(isinstance(r["eta"], str) and r["eta"].endswith("Z") for r in records)
