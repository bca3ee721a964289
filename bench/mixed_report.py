"""The mixed workload's report (`bench/mixed.py`): a Markdown table of its figures per
store size, ours beside Datasette's, and a chart of latency and memory against store
size.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from mixed import STEPS


def write_curve(out: Path, results: list[dict]) -> None:
    """`out` (Markdown) with a table of the mixed workload per store size, ours beside
    Datasette's, and a chart of latency and memory against store size beside it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def value(result: dict, figure_id: str) -> float | None:
        return next((statistics.median(f["values"]) for f in result["figures"] if f["id"] == figure_id and f["values"]), None)

    sizes = [r["raw"]["records"] for r in results]
    charted = any(value(r, "mixed.p50") is not None for r in results)  # not when the load step was left out
    if charted:
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
        for figure_id, label, style in (("mixed.p50", "lineups p50", "o-"), ("mixed.p99", "lineups p99", "o--"),
                                        ("datasette.p50", "Datasette p50", "s-"), ("datasette.p99", "Datasette p99", "s--")):
            points = [(n, value(r, figure_id)) for n, r in zip(sizes, results) if value(r, figure_id) is not None]
            if points:
                left.plot(*zip(*points), style, label=label)
        left.axhline(250, color="grey", linestyle=":", label="p99 target, 250 ms")
        left.set(xscale="log", yscale="log", xlabel="records in the store", ylabel="ms", title="Distinct first pages: latency")
        left.legend(fontsize=8)
        for figure_id, label, style in (("mixed.rss", "lineups serve", "o-"), ("datasette.rss", "Datasette", "s-")):
            points = [(n, value(r, figure_id)) for n, r in zip(sizes, results) if value(r, figure_id) is not None]
            if points:
                right.plot(*zip(*points), style, label=label)
        right.axhline(600 * 10**6 / 2**20, color="grey", linestyle=":", label="target, 600 MB")
        right.set(xscale="log", xlabel="records in the store", ylabel="MiB", title="Server memory after the pass")
        right.set_ylim(bottom=0)
        right.legend(fontsize=8)
        for axis in (left, right):  # the measured sizes, not a log scale's crowded minor ticks
            axis.set_xticks(sizes, [f"{n / 1e6:g}M" if n >= 1e6 else f"{n / 1e3:g}k" for n in sizes])
            axis.minorticks_off()
        fig.tight_layout()
        fig.savefig(out.with_suffix(".png"), dpi=110)
        plt.close(fig)
    rows = []
    for figure_id, label in (("mixed.rate", "lineups: distinct pages/s (target ≥ 150)"), ("mixed.p50", "lineups: p50 ms"),
                             ("mixed.p99", "lineups: p99 ms (target ≤ 250)"), ("mixed.rss", "lineups: server RSS MiB (≤ 600)"),
                             ("datasette.rate", "Datasette: pages/s"), ("datasette.p50", "Datasette: p50 ms"),
                             ("datasette.p99", "Datasette: p99 ms"), ("datasette.rss", "Datasette: RSS MiB"),
                             ("datasette_tuned.rate", "Datasette set up as an API: pages/s"),
                             ("datasette_tuned.p50", "Datasette set up as an API: p50 ms"),
                             ("datasette_tuned.p99", "Datasette set up as an API: p99 ms"),
                             ("mixed.views", "building 7 buyers' views, s"), ("mixed.view_bytes", "bytes per kept row"),
                             ("mixed.startup", "fresh server: /healthz after, s (≤ 2)"),
                             ("mixed.first_page", "then slowest first page, s (≤ 2)"),
                             ("mixed.subscription", "subscription change: that buyer's slowest page, s (≤ 3)"),
                             ("mixed.subscription.command", "the command (views built, then the change), s"),
                             ("mixed.subscription.others", "meanwhile others' slowest page, ms"),
                             ("mixed.subscription.delay", "meanwhile the most another buyer's page was delayed, ms (≤ 200)"),
                             ("mixed.ingest", "100,000-record ingest under load, rows/s"),
                             ("mixed.ingest.others", "meanwhile others' slowest page, ms"),
                             ("mixed.ingest.delay", "meanwhile the most another buyer's page was delayed, ms (≤ 200)"),
                             ("mixed.daily", "1,000-record update: from its start until a reader sees it in every view, s (≤ 2)"),
                             ("mixed.daily.command", "the update's own wait, until its commit returns, s")):
        cells = [value(r, figure_id) for r in results]
        if all(c is None for c in cells):
            continue  # a step left out (--steps)
        rows.append(f"| {label} | " + " | ".join("—" if c is None else f"{c:,.1f}" for c in cells) + " |")
    steps = sorted({step for r in results for step in r.get("steps", STEPS)}, key=STEPS.index)
    only = "" if len(steps) == len(STEPS) else " --steps " + " ".join(steps) + f" --out {out}"
    on_pg = any(r.get("store") == "postgresql" for r in results)
    own = next((r["postgresql"] for r in results if "postgresql" in r), None)
    out.write_text("\n".join([
        "# The mixed workload at several store sizes" + (", on PostgreSQL" if on_pg else ""),
        "",
        f"Written by `.venv/bin/python bench/mixed.py --records 250000 1000000{(' --own-pg' if own else ' --pg URL') if on_pg else ''}{only} …` (see `bench/mixed.py` for what it",
        "does; `--keep-other-sizes` adds a size to the sizes measured before). **Measured:** "
        + "; ".join(f"{r['raw']['records']:,} records at {r.get('measured_at', '?')}" for r in results)
        + f". **Machine:** {results[-1].get('machine', '?')}." + (f" **PostgreSQL:** {own}." if own else ""),
        "",
        "| figure | " + " | ".join(f"{n:,} records" for n in sizes) + " |",
        "|---|" + "--:|" * len(sizes),
        *rows,
        "",
        *([f"![Latency and memory against store size, beside Datasette]({out.with_suffix('.png').name})", ""]
          if charted else []),
        "PostgreSQL with one and two server processes (`bench/scaling.py`): benchmarks-scaling.md.",
        "",
    ]), encoding="utf-8")
