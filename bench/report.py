"""The benchmark's report: `docs/benchmarks.md`, its chart and its raw figures.

`write_report` writes the Markdown table of one run (date, machine, versions; every
figure with median, min, max, target and whether it was met, next to its reference and
the ratio), the chart (a PNG of request rate and latency against the ceiling, made
with matplotlib), the raw figures as JSON beside them, and, for every figure that
misses its target, what limits it and what would fix it (`findings.FINDINGS`).
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from figures import Figure, Target  # noqa: E402
from findings import FINDINGS, HISTORY, METHOD  # noqa: E402
from load import LoadResult  # noqa: E402


def _number(value: float, unit: str) -> str:
    if unit in ("rows/s", "req/s"):
        return f"{value:,.0f}"
    if unit == "MiB":
        return f"{value:,.0f}"
    if unit == "ms":
        return f"{value:,.2f}"
    return f"{value:,.3f}"


def _target(figure: Figure) -> str:
    if figure.target is None:
        return ""
    return figure.target.text or f"{figure.target.op.replace('>=', '≥').replace('<=', '≤')} {_number(figure.target.value, figure.unit)}"


def _met(figure: Figure) -> str:
    if figure.missing:
        return "not measured"
    return {True: "met", False: "**missed**", None: ""}[figure.met]


def _row(figure: Figure) -> str:
    if figure.missing:
        cells = [figure.section, figure.label, "—", "—", "—", figure.unit, _target(figure), _met(figure), figure.missing, ""]
    else:
        reference = f"{figure.reference[0]}: {_number(figure.reference[1], figure.unit)}" if figure.reference else ""
        ratio = f"{figure.ratio:.2f}×" if figure.ratio is not None else ""
        cells = [
            figure.section, figure.label, _number(figure.median, figure.unit), _number(figure.low, figure.unit),
            _number(figure.high, figure.unit), figure.unit, _target(figure), _met(figure), reference, ratio,
        ]
    return "| " + " | ".join(cells) + " |"


def chart(path: Path, ceiling: list[LoadResult], service: list[LoadResult], title: str) -> None:
    """Requests/s and p50/p99 latency of the service against the ceiling, median
    bars with min–max whiskers."""
    fig, (rate_axis, latency_axis) = plt.subplots(1, 2, figsize=(10, 4.2))
    colours = {"ceiling": "#9aa5b1", "service": "#2f6fb0"}
    runs = {"ceiling": ceiling, "service": service}

    def bar(axis, x, values, colour, label=None):
        values = sorted(values)
        middle = values[len(values) // 2]
        axis.bar(x, middle, 0.38, color=colour, label=label)
        axis.errorbar(x, middle, yerr=[[middle - values[0]], [values[-1] - middle]], color="black", capsize=4)
        axis.annotate(f"{middle:,.0f}" if middle >= 100 else f"{middle:.1f}", (x, middle),
                      textcoords="offset points", xytext=(0, 4), ha="center", fontsize=8)

    for i, name in enumerate(runs):
        bar(rate_axis, i, [r.rate for r in runs[name]], colours[name])
    ceiling_rate = sorted(r.rate for r in ceiling)[len(ceiling) // 2]
    rate_axis.axhline(0.5 * ceiling_rate, color="#c0392b", linestyle="--", linewidth=1, label="target: 50% of ceiling")
    rate_axis.set_xticks([0, 1], ["ceiling\n(bare Tornado)", "service\n(/v1/lineups)"])
    rate_axis.set_ylabel("requests/s (32 connections)")
    rate_axis.set_title("Request rate")
    rate_axis.legend(fontsize=8, loc="upper right")

    for j, (metric, attribute) in enumerate((("p50", "p50_ms"), ("p99", "p99_ms"))):
        for i, name in enumerate(runs):
            bar(latency_axis, j + (i - 0.5) * 0.4, [getattr(r, attribute) for r in runs[name]], colours[name],
                name if j == 0 else None)
    ceiling_p99 = sorted(r.p99_ms for r in ceiling)[len(ceiling) // 2]
    latency_axis.plot([0.75, 1.25], [3 * ceiling_p99] * 2, color="#c0392b", linestyle="--", linewidth=1,
                      label="target: p99 ≤ 3× ceiling")
    latency_axis.set_xticks([0, 1], ["p50", "p99"])
    latency_axis.set_ylabel("latency (ms)")
    latency_axis.set_title("Latency")
    latency_axis.legend(fontsize=8, loc="upper left")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(out: Path, figures: list[Figure], run: dict, loads: tuple[list, list] | None) -> None:
    """Write the report to `out`, the chart and raw JSON beside it (same stem)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    png, raw = out.with_suffix(".png"), out.with_suffix(".json")
    lines = [
        "# Benchmarks",
        "",
        "Measured by one command, which writes this file, its chart and its raw figures "
        f"(`{raw.name}`):",
        "",
        "```sh",
        f".venv/bin/python bench/run.py --out docs/{out.name}",
        "```",
        "",
        "`--quick` measures a ~20,000-record store in a few minutes (the test suite runs it, "
        "so the benchmark code never rots; its figures mean little). `--records N` sets the "
        "store size, `--runs R` the repetitions, `--pg URL` the PostgreSQL server for the "
        "ingest figure (default `$LINEUPS_TEST_PG`, else the local `test` database).",
        "",
        f"**This run:** {run['date']}, {run['records']:,} records, {run['runs']} runs of each figure"
        f"{' (quick mode)' if run['quick'] else ''}, {run['seconds']:.0f} s in all.  ",
        f"**Machine:** {run['machine']}.  ",
        f"**Versions:** {run['versions']}.",
        "",
        "Every figure is the median of its runs, with min and max. This machine is shared "
        "with other work, so timings of the service stand next to the same run's reference "
        "(a ceiling or a baseline), with the ratio of the medians.",
        "",
        "| section | figure | median | min | max | unit | target | | reference (median) | ratio |",
        "|---|---|--:|--:|--:|---|---|---|---|--:|",
        *(_row(f) for f in figures),
        "",
    ]
    notes = [f"- **{f.label}**: {f.note}" for f in figures if f.note]
    if notes:
        lines += ["Notes:", "", *notes, ""]
    if loads:
        chart(png, *loads, f"/v1/lineups warm pages vs. bare Tornado ceiling — {run['records']:,} records, {run['date']}")
    if loads or png.exists():  # rewritten from the JSON (`from_json`): the run's chart
        lines += [f"![Request rate and latency of warm /v1/lineups pages against the ceiling]({png.name})", ""]
    missed = [f for f in figures if f.met is False or (f.missing and f.target is not None)]
    lines += ["## What limits the figures that miss their target", ""]
    if not missed:
        lines += ["Every figure met its target in this run.", ""]
    findings: dict[str, list[str]] = {}  # one finding may explain several figures
    for figure in missed:
        findings.setdefault(FINDINGS.get(figure.id, "Not profiled yet."), []).append(figure.label)
    for finding, labels in findings.items():
        lines += [f"### {'; '.join(labels)}", "", finding, ""]
    lines += ["## Earlier runs", "", HISTORY, ""]
    lines += ["## How it measures", "", METHOD, ""]
    out.write_text("\n".join(lines), encoding="utf-8")
    raw.write_text(json.dumps({"run": run, "figures": [f.as_dict() for f in figures]}, indent=1, default=str) + "\n")


def from_json(raw: Path) -> tuple[list[Figure], dict]:
    """The figures and run of a report's raw JSON (`write_report`'s), to write the
    report again with today's findings without measuring again."""
    data = json.loads(raw.read_text())
    figures = []
    for item in data["figures"]:
        fields = {k: item[k] for k in ("id", "section", "label", "unit", "values", "note", "missing")}
        target = Target(**item["target"]) if item["target"] else None
        reference = tuple(item["reference"]) if item["reference"] else None
        figures.append(Figure(**fields, target=target, reference=reference))
    return figures, data["run"]


if __name__ == "__main__":  # python bench/report.py docs/benchmarks.json: rewrite its report
    import sys

    raw = Path(sys.argv[1])
    figures, run = from_json(raw)
    write_report(raw.with_suffix(".md"), figures, run, None)
