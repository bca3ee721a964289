"""docs/benchmarks.md and its chart, made from the result files under `bench/results/`.

    python -m bench report [--results bench/results] [--out docs/benchmarks.md]

One table: for every figure and store, its latest measurement beside its target, the
store size, the date and the machine it was measured on. The chart: the mixed
workload's distinct first pages against store size, the latest run at each size, beside
Datasette. tests/bench/test_report.py checks that the committed page is what this makes
of the committed results.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the file backend)

from bench.figures import RESULTS, Figure, load_results  # noqa: E402

DOCS = Path(__file__).resolve().parents[1] / "docs"
STORES = {"sqlite": "SQLite", "postgresql": "PostgreSQL", "postgresql-own": "PostgreSQL (sized)", "memory": "in process"}
#: Figures measured on another store than their run's.
STORE_OF = {"ingest.postgresql": "PostgreSQL", "merge.cold": "in process", "merge.memory": "in process"}
#: Sections in the order a reader asks: the headline first.
ORDER = ("Mixed workload", "PostgreSQL processes", "Ingest", "Merge", "Exports", "Explorer at store size",
         "Staying in sync (issue 46)")

INTRO = """\
# Benchmarks

What a buyer and an operator wait for, measured against the targets on a store of
realistic size, beside what a user would pick instead (Datasette over the same records).
The headline is the **mixed workload**: 7 buyers on different subscriptions asking 1,500
distinct filtered first pages of a freshly started server, while a subscription changes,
a 100,000-record feed file is ingested and a daily update arrives.

## Measuring on your machine

Every workload is one command, run from the repository's root; each run writes one
small JSON file under `bench/results/` (commit it), and `python -m bench report` makes
this page from them.

```sh
.venv/bin/python -m bench                                   # the workloads
.venv/bin/python -m bench mixed --records 250000 1000000    # the headline, SQLite
.venv/bin/python -m bench mixed --records 1000000 --own-pg  # on a PostgreSQL sized as docs/deploying.md says
.venv/bin/python -m bench scaling --own-pg                  # PostgreSQL, one server process against two
.venv/bin/python -m bench full                              # ingest, merge, mixed, exports, explorer: one 1M store
.venv/bin/python -m bench full --quick                      # the same in a few minutes (the test suite runs it)
.venv/bin/python -m bench explorer                          # the explorer in Chromium at store size
.venv/bin/python -m bench soak                              # sustained load, every response checked
.venv/bin/python -m bench sync                              # a caught-up sync through the change feed vs a full download
.venv/bin/python -m bench report                            # this page
```

The benchmarks need Debian's `wrk` (load), `chromium` (the explorer) and, for
`--own-pg`, PostgreSQL's server programs; Datasette is installed from PyPI into a
virtual environment of its own on first use. Load only ever targets 127.0.0.1, and
every process a benchmark starts it stops. Figures move with the machine: each result
carries the machine's speed in fixed tasks (a Python loop, page-cache reads and
writes), and a service timing carries the same run's reference (a bare `executemany`,
a plain pandas merge, the CSV writer alone), so that a slow hour of a shared machine
shows as such. How the service meets these figures, and where it falls short,
is in docs/architecture.md.

## The latest figures

Each row is the latest measurement of a figure on a store: the median of its runs (the
range when there were several), its target, and whether the median met it.
"""


def _number(value: float, unit: str) -> str:
    if unit in ("rows/s", "req/s", "MiB", "B", "pairs", "rows", ""):
        return f"{value:,.0f}" if abs(value) >= 10 or value == int(value) else f"{value:,.1f}"
    if unit == "ms":
        return f"{value:,.1f}"
    return f"{value:,.2f}"


def latest(results: list[dict]) -> list[tuple[Figure, dict]]:
    """Each (figure id, store)'s latest measurement with its result; a later result,
    or at the same time a larger store, wins. Quick runs are left out."""
    kept: dict[tuple[str, str], tuple[Figure, dict]] = {}
    for result in sorted(results, key=lambda r: (r["measured"], r["records"])):
        if result["workload"].endswith("-quick"):
            continue
        for data in result["figures"]:
            figure = Figure.from_dict(data)
            if figure.values:
                kept[(figure.id, result["store"])] = (figure, result)
    order = {section: i for i, section in enumerate(ORDER)}
    first: dict[str, int] = {}
    for figure_id, _ in kept:
        first.setdefault(figure_id, len(first))
    return sorted(kept.values(), key=lambda item: (order.get(item[0].section, len(ORDER)), item[0].section,
                                                   item[1]["store"], first[item[0].id]))


def table(results: list[dict]) -> str:
    rows = latest(results)
    machines: dict[str, str] = {}
    lines = ["| section | figure | value | unit | target | | store | records | measured | machine |",
             "|---|---|--:|---|---|---|---|--:|---|---|"]
    for figure, result in rows:
        tag = machines.setdefault(result["machine"], chr(ord("A") + len(machines)))
        value = _number(figure.median, figure.unit)
        if len(figure.values) > 1:
            value += f" ({_number(min(figure.values), figure.unit)}–{_number(max(figure.values), figure.unit)})"
        target = str(figure.target) if figure.target else ""
        if figure.reference:
            target += ("; " if target else "") + f"beside {figure.reference[0]}: {_number(figure.reference[1], figure.unit)}"
        met = {True: "met", False: "**missed**", None: ""}[figure.met]
        store = STORE_OF.get(figure.id) or STORES.get(result["store"].split("-cpus")[0], result["store"])
        if "-cpus" in result["store"]:
            store += f", {result['store'].split('-cpus')[1]} core a process"
        lines.append(f"| {figure.section} | {figure.label} | {value} | {figure.unit} | {target} | {met} | {store} | "
                     f"{result['records']:,} | {result['measured']} | {tag} |")
    lines += ["", "Machines:", ""]
    lines += [f"- **{tag}**: {description}" for description, tag in machines.items()]
    return "\n".join(lines)


def curves(results: list[dict]) -> dict[str, dict[int, tuple[float, float]]]:
    """(pages/s, p99 ms) by store size of the service on each store and of Datasette:
    the latest run at each size."""
    out: dict[str, dict[int, tuple[float, float]]] = {}
    for result in sorted(results, key=lambda r: r["measured"]):
        if result["workload"].endswith("-quick"):
            continue
        values = {f["id"]: statistics.median(f["values"]) for f in result["figures"] if f["values"]}
        for prefix, name in (("mixed", f"lineups, {STORES.get(result['store'], result['store'])}"),
                             ("datasette", "Datasette as it comes"), ("datasette_tuned", "Datasette set up as an API")):
            if f"{prefix}.rate" in values:
                out.setdefault(name, {})[result["records"]] = (values[f"{prefix}.rate"], values[f"{prefix}.p99"])
    return out


def chart(results: list[dict], path: Path) -> None:
    fig, (rate, p99) = plt.subplots(1, 2, figsize=(10, 3.8))
    sizes = set()
    for name, points in sorted(curves(results).items()):
        xs = sorted(points)
        sizes.update(xs)
        style = "s--" if name.startswith("Datasette") else "o-"
        rate.plot(xs, [points[x][0] for x in xs], style, label=name)
        p99.plot(xs, [points[x][1] for x in xs], style, label=name)
    rate.axhline(150, color="grey", linestyle=":", label="target ≥ 150")
    p99.axhline(250, color="grey", linestyle=":", label="target ≤ 250 ms")
    rate.set(xscale="log", yscale="log", xlabel="records in the store", ylabel="distinct first pages/s",
             title="Mixed workload: pages/s (4 clients)")
    p99.set(xscale="log", yscale="log", xlabel="records in the store", ylabel="p99 ms", title="Mixed workload: p99")
    for axis in (rate, p99):
        axis.set_xticks(sorted(sizes), [f"{n / 1e6:g}M" if n >= 1e6 else f"{n / 1e3:g}k" for n in sorted(sizes)])
        axis.minorticks_off()
        axis.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def render(results: list[dict], chart_name: str = "benchmarks.png") -> str:
    """The whole page for `results`."""
    return "\n".join([
        INTRO, table(results), "",
        f"![The mixed workload's pages/s and p99 by store size, the latest run at each size, beside Datasette]({chart_name})",
        "",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench report", description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--out", type=Path, default=DOCS / "benchmarks.md")
    args = parser.parse_args(argv)
    results = load_results(args.results)
    png = args.out.with_suffix(".png")
    args.out.write_text(render(results, png.name), encoding="utf-8")
    chart(results, png)
    print(f"wrote {args.out} and {png} from {len(results)} result files")
    return 0
