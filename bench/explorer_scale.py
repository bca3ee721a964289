"""The explorer at store size (issue 17: "first view ≤ 2 s and filter change ≤ 1 s,
cold, 1M records"), in a real browser.

For each size: a fresh SQLite store with the demo data set of that many records (the
calls placed around today, as `lineups serve --demo` places them), the demo buyer's
views built as the command line builds them after loading (`builds.ensure_buyer`),
then a **fresh** `python -m explorer` process and an empty headless Chromium
(Debian's, driven by Playwright). Measured as a buyer would notice:

- first view, cold: from submitting the sign-in form to the first table rows on
  screen, the first sign-in to a process that has just started (no warming exists):
  the median of `COLD_RUNS` fresh processes, each signed into once (one sample
  varies by 0.3-0.7 s on this machine);
- first view, warm: a second sign-in in a new browser context;
- each filter change (port, a commodity group, latest, one row per feed, back to
  merged, a date window, a sort by quantity): from the change to the new row count on
  screen and no longer "updating…". Every change asks a question not asked before.

    python bench/explorer_scale.py                    # 250k and 1M records
    python bench/explorer_scale.py --records 20000    # a quick look

Writes docs/benchmarks-explorer.json and .md (and a PNG chart of the times per size).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

sys.path.insert(0, str(REPO / "bench"))
from processes import Process, free_port, rss_mib  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]
SECRET = "bench-explorer-secret"
TIMEOUT_MS = 120_000
#: Fresh explorer processes per size whose first sign-in is timed (the median is reported).
COLD_RUNS = 3


def log(text: str) -> None:
    print(f"[{dt.datetime.now():%H:%M:%S}] {text}", flush=True)


def build_store(folder: Path, records: int) -> tuple[str, dict, float, float]:
    """(db URL, demo payload, seconds loading, seconds building the buyer's views)."""
    from store.database.db import create_schema, engine_for, make_sessionmaker, transaction
    from store.intake.demo import load_demo
    from store.settings import Settings
    from store.views import builds

    settings = Settings(db_url=f"sqlite:///{folder / 'lineups.db'}", secrets=(SECRET,))
    engine = engine_for(settings)
    create_schema(engine)
    sessions = make_sessionmaker(engine)
    seen = [0, time.monotonic()]

    def progress(done: int) -> None:
        seen[0] += done
        if time.monotonic() - seen[1] > 10:
            log(f"  {seen[0]:,} of {records:,} records loaded")
            seen[1] = time.monotonic()

    started = time.monotonic()
    with transaction(sessions) as session:
        payload = load_demo(session, records, seed=7, progress=progress)
    loaded = time.monotonic() - started
    log(f"  loaded {records:,} records in {loaded:.0f} s; building the demo buyer's views")
    started = time.monotonic()
    builds.ensure_buyer(sessions, payload["buyer_id"])
    built = time.monotonic() - started
    engine.dispose()
    return settings.db_url, payload, loaded, built


def start_explorer(db_url: str, folder: Path) -> tuple[Process, float]:
    """A fresh `python -m explorer` over `db_url`, answering; and the seconds it took."""
    port = free_port()
    command = [sys.executable, "-m", "explorer", "--db", db_url, "--port", str(port)]
    server = Process(command, port, folder / "explorer.log", {"LINEUPS_SECRET": SECRET})
    started = time.monotonic()
    server.start("/explorer/login")
    return server, time.monotonic() - started


def sign_in(browser, base: str, key: str):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(f"{base}/explorer")
    page.wait_for_selector("#api_key")
    page.fill("#api_key", key)
    started = time.perf_counter()
    page.click("button[type=submit]")
    page.locator(".lineups-table .tabulator-row").first.wait_for(state="visible")
    rows = time.perf_counter() - started
    watch_charts(page)  # the page is new: the charts' note is watched from the rows on
    return page, rows, rows + charts_drawn(page, 0.0)


#: Watches the note under the charts from inside the page (through the shadow roots
#: Panel renders into), every 20 ms: when it first says "Charts updating…" and when
#: it stops saying so after that.
WATCH_CHARTS = """() => {
  const find = (root) => {
    const hit = root.querySelector('.chart-note');
    if (hit) return hit;
    for (const el of root.querySelectorAll('*')) {
      if (el.shadowRoot) { const inner = find(el.shadowRoot); if (inner) return inner; }
    }
    return null;
  };
  const watch = {started: performance.now(), seen: null, done: null};
  window.__charts = watch;
  const timer = setInterval(() => {
    const note = find(document);
    const text = note ? (note.shadowRoot ? note.shadowRoot.textContent : note.textContent) : '';
    if (text.includes('updating')) { if (watch.seen === null) watch.seen = performance.now(); }
    else if (watch.seen !== null) { watch.done = performance.now(); clearInterval(timer); }
  }, 20);
}"""


def watch_charts(page) -> None:
    page.evaluate(WATCH_CHARTS)


def charts_drawn(page, rows_s: float) -> float:
    """Seconds from the watch's start until the charts were drawn: the end of "Charts
    updating…", or, when it was never seen within 2 s after the rows, the rows' time
    (the totals came with them)."""
    try:
        page.wait_for_function("() => window.__charts && window.__charts.done !== null", timeout=TIMEOUT_MS
                               if page.evaluate("() => window.__charts.seen !== null") else 2_000)
    except Exception:  # never seen updating: drawn with the rows
        return rows_s
    watch = page.evaluate("() => window.__charts")
    return (watch["done"] - watch["started"]) / 1000


def change(page, action) -> tuple[float, float]:
    """Seconds from `action` to the new count on screen, and to the charts drawn."""
    from playwright.sync_api import expect

    count = page.locator(".row-count p").first
    before = count.inner_text()
    watch_charts(page)
    started = time.perf_counter()
    action(page)
    expect(count).not_to_have_text(before, timeout=TIMEOUT_MS)
    expect(count).not_to_contain_text("updating", timeout=TIMEOUT_MS)
    rows = time.perf_counter() - started
    return rows, max(rows, charts_drawn(page, rows))


def pick_commodity(page, name: str) -> None:
    box = page.locator(".filter-commodity input").first
    box.click()
    box.press_sequentially(name[:4])
    page.locator(".filter-commodity .bk-menu div", has_text=f"{name} ·").first.click()
    page.keyboard.press("Escape")  # close the suggestions, as a buyer moving on would


def measure(records: int, folder: Path, store: tuple[str, dict] | None = None) -> dict:
    """Times of one size; `store` (db URL, demo payload) reuses a store built before."""
    from playwright.sync_api import sync_playwright

    if store is None:
        log(f"{records:,} records: building the store")
        db_url, payload, loaded, built = build_store(folder, records)
    else:
        (db_url, payload), loaded, built = store, 0.0, 0.0
    result: dict = {"records": records, "load_s": round(loaded, 1), "views_s": round(built, 1)}
    colds: list[tuple[float, float]] = []
    server = None
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for _ in range(COLD_RUNS):  # the last process goes on with the filter changes
                if server is not None:
                    page.context.close()
                    server.stop()
                server, started = start_explorer(db_url, folder)
                log(f"  explorer answering {started:.1f} s after start; signing in")
                page, cold, cold_charts = sign_in(browser, server.base_url, payload["api_key"])
                colds.append((cold, cold_charts))
                log(f"  first view cold: {cold:.3f} s (charts {cold_charts:.3f} s)")
            base = server.base_url
            result["process_start_s"] = round(started, 2)
            result["first_view_cold_runs_s"] = [round(c, 3) for c, _ in colds]
            result["first_view_cold_s"] = round(statistics.median(c for c, _ in colds), 3)
            result["charts_cold_s"] = round(statistics.median(c for _, c in colds), 3)
            result["rows_on_first_view"] = page.locator(".row-count p").first.inner_text().split("\n")[0]
            today = dt.datetime.now(dt.timezone.utc).date()
            steps = {
                "latest call only (all ports, from today)": lambda p: p.locator(".filter-latest input").check(),
                "port Santos": lambda p: p.locator(".filter-port select").select_option(label="Santos (BRSSZ)"),
                "commodity Soybeans": lambda p: pick_commodity(p, "Soybeans"),
                "every call again": lambda p: p.locator(".filter-latest input").uncheck(),
                "one row per feed": lambda p: p.locator(".filter-merge button", has_text="One row per feed").click(),
                "merged again": lambda p: p.locator(".filter-merge button", has_text="Merge all feeds").click(),
                "next 7 days": lambda p: _date(p, "date_to", today + dt.timedelta(days=6)),
                "sort by quantity": lambda p: p.locator(".sort-by select").select_option(label="Quantity"),
            }
            changes, drawn = {}, {}
            for label, action in steps.items():
                try:
                    rows, charts = change(page, action)
                    changes[label], drawn[label] = round(rows, 3), round(charts, 3)
                except Exception as error:  # a step that shows no change is reported, not fatal
                    changes[label] = drawn[label] = None
                    log(f"  {label}: {type(error).__name__}: {str(error).splitlines()[0]}")
                log(f"  {label}: rows {changes[label]} s, charts {drawn[label]} s")
            result["filter_changes_s"] = changes
            result["charts_after_change_s"] = drawn
            timed = [v for v in changes.values() if v is not None]
            result["filter_change_median_s"] = round(statistics.median(timed), 3) if timed else None
            result["filter_change_max_s"] = round(max(timed), 3) if timed else None
            page.context.close()
            page, warm, warm_charts = sign_in(browser, base, payload["api_key"])
            result["first_view_warm_s"] = round(warm, 3)
            result["charts_warm_s"] = round(warm_charts, 3)
            page.context.close()
            browser.close()
        result["explorer_rss_mib"] = round(rss_mib(server.pid), 1)
    finally:
        if server is not None:
            server.stop()
    log(f"  cold {result['first_view_cold_s']} s, warm {result.get('first_view_warm_s')} s, "
        f"filter change median {result.get('filter_change_median_s')} s, slowest {result.get('filter_change_max_s')} s")
    return result


def _date(page, name: str, day: dt.date) -> None:
    box = page.locator(f".filter-{name} input").first
    box.fill(f"{day:%Y-%m-%d}")
    box.press("Enter")


def report(results: list[dict], out: Path) -> None:
    load = os.getloadavg()[0]
    payload = {"measured_at": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
               "load_average_1m_at_end": round(load, 2), "cpus": os.cpu_count(), "runs": results}
    out.with_suffix(".json").write_text(json.dumps(payload, indent=2) + "\n")
    lines = [
        "# The explorer at store size",
        "",
        f"Measured {payload['measured_at']} by `bench/explorer_scale.py` on this {os.cpu_count()}-core machine "
        f"(load average {load:.1f} at the end): a fresh SQLite store of the demo data per size, the demo "
        "buyer's views built as after `lineups demo`, a fresh `python -m explorer`, headless Debian Chromium. "
        f"Targets (issue 17): first view ≤ 2 s cold, filter change ≤ 1 s. First view cold: the median of {COLD_RUNS} "
        "fresh explorer processes' first sign-ins (each run's times in the JSON).",
        "",
        "The rows come first, the charts when their totals are summed (the table does not wait for them): "
        "both times are given, from the sign-in or the change.",
        "",
        "| records | first view cold | warm | charts drawn cold | filter change median | slowest | explorer RSS | rows on the first view |",
        "|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['records']:,} | {r['first_view_cold_s']:.2f} s ({min(r['first_view_cold_runs_s']):.2f}–"
            f"{max(r['first_view_cold_runs_s']):.2f}) | {r.get('first_view_warm_s', float('nan')):.2f} s | "
            f"{r.get('charts_cold_s', float('nan')):.2f} s | "
            f"{r.get('filter_change_median_s') or float('nan'):.2f} s | {r.get('filter_change_max_s') or float('nan'):.2f} s | "
            f"{r.get('explorer_rss_mib', 0):.0f} MiB | {r.get('rows_on_first_view', '')} |"
        )
    lines += ["", "Each filter change, in order (seconds to the new count on screen / to the charts drawn):", "",
              "| change | " + " | ".join(f"{r['records']:,}" for r in results) + " |",
              "|---|" + "--:|" * len(results)]

    def cell(r: dict, label: str) -> str:
        rows, charts = r["filter_changes_s"].get(label), r.get("charts_after_change_s", {}).get(label)
        return "–" if rows is None else f"{rows:.2f} / {charts:.2f}"

    for label in results[0].get("filter_changes_s", {}):
        lines.append(f"| {label} | " + " | ".join(cell(r, label) for r in results) + " |")
    lines += ["", "Store build per size (not part of the figures): "
              + "; ".join(f"{r['records']:,}: loaded in {r['load_s']:.0f} s, views in {r['views_s']:.0f} s" for r in results),
              "", "![Times per store size](benchmarks-explorer.png)", ""]
    out.with_suffix(".md").write_text("\n".join(lines))
    _chart(results, out.with_suffix(".png"))


def _chart(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r["records"] for r in results]
    fig, ax = plt.subplots(figsize=(7, 4))
    for key, label in (("first_view_cold_s", "first view, cold"), ("first_view_warm_s", "first view, warm"),
                       ("filter_change_median_s", "filter change, median"), ("filter_change_max_s", "filter change, slowest")):
        ax.plot(sizes, [r.get(key) for r in results], marker="o", label=label)
    ax.axhline(2.0, color="grey", linestyle="--", linewidth=1)
    ax.axhline(1.0, color="grey", linestyle=":", linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("records in the store")
    ax.set_ylabel("seconds")
    ax.set_title("The explorer in a browser, by store size")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, nargs="+", default=[250_000, 1_000_000])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks-explorer")
    args = parser.parse_args()
    results = []
    for records in args.records:
        with tempfile.TemporaryDirectory(prefix=f"lineups-explorer-{records}-") as folder:
            results.append(measure(records, Path(folder)))
    report(results, args.out)
    log(f"written {args.out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
