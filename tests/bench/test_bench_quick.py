"""The whole bench (`python -m bench full`, issues 8 and 15) runs end to end in its quick
mode, so that its code never rots. Its figures mean little at this size and are not
asserted: the run is made as small as it goes (5,000 records, one run of each
figure), every step of it still taken, and it writes its result file."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_quick_benchmark_writes_its_result_file(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "bench", "full", "--quick", "--records", "5000", "--runs", "1",
         "--results", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=480,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (written,) = tmp_path.glob("*-full-quick-sqlite-5000.json")
    result = json.loads(written.read_text())
    assert result["workload"] == "full-quick" and result["records"] == 5000
    assert result["command"].startswith("python -m bench full --quick")
    # The machine's speed beside the figures: runs on machines two to three times apart
    # in speed are compared by it.
    assert re.search(r"a Python loop of 5M additions [\d,]+ ms, a 4 KiB read [\d.]+ µs and write [\d.]+ µs", result["machine"])
    figures = {f["id"]: f for f in result["figures"]}
    for measured in ("mixed.rate", "mixed.p99", "mixed.rss", "mixed.subscription", "mixed.subscription.delay",
                     "mixed.ingest.delay", "mixed.daily", "mixed.daily.command",
                     "ingest.sqlite", "merge.cold", "export.whole", "export.whole.memory", "export.share"):
        assert figures[measured]["values"], measured
    assert figures["mixed.rate"]["target"] == {"op": ">=", "value": 150, "text": ""}
    assert written.stat().st_size < 20_000  # kept small
