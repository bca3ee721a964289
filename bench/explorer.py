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

    python -m bench explorer                    # 250k and 1M records
    python -m bench explorer --records 20000    # a quick look

Each size writes one result file.
"""

from __future__ import annotations

import datetime as dt
import statistics
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

from bench.figures import Figure, Run, Target, command, say
from bench.processes import Process, free_port, rss_mib
from store.database.db import create_schema, engine_for, make_sessionmaker, transaction
from store.intake.demo import load_demo
from store.settings import Settings
from store.views import builds

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]
SECRET = "bench-explorer-secret-of-at-least-32-characters"
TIMEOUT_MS = 120_000
#: Fresh explorer processes per size whose first sign-in is timed (the median is reported).
COLD_RUNS = 3


def log(text: str) -> None:
    say("explorer", text)


def build_store(folder: Path, records: int) -> tuple[str, dict, float, float]:
    """(db URL, demo payload, seconds loading, seconds building the buyer's views)."""
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


def figures_of(result: dict) -> list[Figure]:
    section = "Explorer at store size"
    one = lambda key: [] if result.get(key) is None else [result[key]]  # noqa: E731 - none when every change failed
    return [
        Figure("explorer.scale.first_view", section, f"first view, cold (median of {COLD_RUNS} fresh explorer processes)",
               "s", result["first_view_cold_runs_s"], Target("<=", 2.0)),
        Figure("explorer.scale.first_view_warm", section, "first view, warm (a later sign-in)", "s",
               one("first_view_warm_s")),
        Figure("explorer.scale.charts", section, "both charts drawn after sign-in, cold", "s", one("charts_cold_s")),
        Figure("explorer.scale.filter_median", section, "filter change to the new count on screen: median of 8", "s",
               one("filter_change_median_s"), Target("<=", 1.0)),
        Figure("explorer.scale.filter_max", section, "filter change: the slowest of 8", "s",
               one("filter_change_max_s"), Target("<=", 1.0)),
        Figure("explorer.scale.rss", section, "explorer process RSS after the changes", "MiB", one("explorer_rss_mib")),
    ]


def explorer_figures(records: int, folder: Path) -> list[Figure]:
    """The explorer's figures on a fresh demo store of `records` records in `folder`."""
    return figures_of(measure(records, folder))


def main(argv: list[str] | None = None) -> int:
    parser = command("explorer", __doc__)
    parser.add_argument("--records", type=int, nargs="+", default=[250_000, 1_000_000])
    args = parser.parse_args(argv)
    for records in args.records:
        run = Run("explorer", args.results, argv)
        with tempfile.TemporaryDirectory(prefix=f"lineups-explorer-{records}-") as folder:
            run.save(explorer_figures(records, Path(folder)), records)
    return 0
