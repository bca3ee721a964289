"""The benchmark (`bench/run.py`, issues 8 and 15) runs end to end in its quick mode, so
that its code never rots. Its figures mean little at this size and are not asserted: the
run is made as small as it goes (5,000 records, one run of each figure, 1 s loads), every
step of it still taken."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_quick_benchmark_writes_its_report(tmp_path):
    out = tmp_path / "benchmarks.md"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "--quick", "--records", "5000", "--runs", "1",
         "--seconds", "1", "--out", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=480,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = out.read_text(encoding="utf-8")
    assert "| section | figure | median | min | max |" in report
    assert "(quick mode)" in report
    # The machine's speed beside the figures (`run.speed`): runs on machines two to
    # three times apart in speed are compared by it.
    assert re.search(r"a Python loop of 5M additions [\d,]+ ms, a 4 KiB read [\d.]+ µs and write [\d.]+ µs", report)
    assert out.with_suffix(".png").stat().st_size > 10_000  # the chart
    figures = {f["id"]: f for f in json.loads(out.with_suffix(".json").read_text())["figures"]}
    for measured in ("mixed.rate", "mixed.p99", "mixed.rss", "mixed.subscription", "mixed.subscription.delay",
                     "mixed.ingest.delay", "mixed.daily", "mixed.daily.command",
                     "ingest.sqlite", "merge.cold", "api.rate", "api.p99", "api.ceiling.rate", "memory.cached", "export.whole"):
        assert figures[measured]["values"], measured
