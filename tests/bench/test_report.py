"""docs/benchmarks.md is made from the result files under bench/results/ (`python -m bench
report`, issue 48): the committed page is what the committed results make, and the page
shows each figure's latest measurement beside its target and machine."""

from __future__ import annotations

from pathlib import Path

from bench import report
from bench.figures import RESULTS, Figure, Target, load_results, save

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_page_is_what_the_committed_results_make():
    committed = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert committed == report.render(load_results(RESULTS)), "run `python -m bench report` and commit the page"


def _run(folder: Path, measured: str, rate: float, where: str, workload: str = "mixed") -> None:
    figures = [Figure("mixed.rate", "Mixed workload", "distinct first pages/s", "req/s", [rate], Target(">=", 150)),
               Figure("mixed.p99", "Mixed workload", "p99 latency", "ms", [rate / 10])]
    save(workload, figures, measured=measured, where=where, store="sqlite", records=250_000, argv=["--records", "250000"],
         folder=folder)


def test_a_later_run_replaces_a_figure_and_a_missed_target_shows(tmp_path):
    _run(tmp_path, "2026-12-01 10:00 UTC", 321.0, "machine one")
    _run(tmp_path, "2026-12-02 10:00 UTC", 123.0, "machine two")
    _run(tmp_path, "2026-12-03 10:00 UTC", 999.0, "a quick run's machine", workload="full-quick")
    page = report.render(load_results(tmp_path))
    (row,) = [line for line in page.splitlines() if "| distinct first pages/s |" in line]
    assert "| 123 | req/s | ≥ 150 | **missed** | SQLite | 250,000 | 2026-12-02 10:00 UTC | A |" in row
    assert "321" not in page and "999" not in page  # the earlier run replaced, the quick run left out
    assert "- **A**: machine two" in page and "machine one" not in page


def test_the_chart_is_drawn_from_the_results(tmp_path):
    _run(tmp_path, "2026-12-01 10:00 UTC", 321.0, "machine one")
    assert report.curves(load_results(tmp_path)) == {"lineups, SQLite": {250_000: (321.0, 32.1)}}
    report.chart(load_results(tmp_path), tmp_path / "chart.png")
    assert (tmp_path / "chart.png").stat().st_size > 10_000
