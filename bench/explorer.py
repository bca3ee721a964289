"""The explorer at store size (issue 17: "first view ≤ 2 s and filter change ≤ 1 s,
cold, 1M records"), in a real browser.

    python -m bench explorer                    # 250k and 1M records, a result file each
    python -m bench explorer --records 20000    # a quick look

For each size a fresh SQLite store of `lineups demo` (the calls around today, the demo
buyer's views built), a **fresh** `python -m explorer` and an empty headless Chromium
(Debian's, through Playwright), measured as a buyer would notice: the first view, cold
(from submitting the sign-in form to the first rows on screen, the first sign-in to a
process just started; the median of `COLD_RUNS` processes) and warm (a second sign-in),
and filter changes, each a question not asked before, from the change to the new row
count on screen and no longer "updating…".
"""

from __future__ import annotations

import datetime as dt
import statistics
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

from bench.figures import Figure, Run, Target, command, say, stage
from bench.processes import Process, free_port, rss_mib
from bench.stores import build_demo

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]
TIMEOUT_MS = 120_000
#: Fresh explorer processes per size whose first sign-in is timed (the median is reported).
COLD_RUNS = 3


def log(text: str) -> None:
    say("explorer", text)


def start_explorer(env: dict[str, str], folder: Path) -> Process:
    """A fresh `python -m explorer` over the store of `env`, answering (`ready_s`)."""
    port = free_port()
    return Process([sys.executable, "-m", "explorer", "--port", str(port)], port, folder / "explorer.log",
                   env).start("/explorer/login")


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


def filter_steps() -> dict:
    """The filter changes, each a question not asked before, in order."""
    today = dt.datetime.now(dt.timezone.utc).date()
    return {
        "latest call only (all ports, from today)": lambda p: p.locator(".filter-latest input").check(),
        "port Santos": lambda p: p.locator(".filter-port select").select_option(label="Santos (BRSSZ)"),
        "commodity Soybeans": lambda p: pick_commodity(p, "Soybeans"),
        "every call again": lambda p: p.locator(".filter-latest input").uncheck(),
        "one row per feed": lambda p: p.locator(".filter-merge button", has_text="One row per feed").click(),
        "merged again": lambda p: p.locator(".filter-merge button", has_text="Merge all feeds").click(),
        "next 7 days": lambda p: _date(p, "date_to", today + dt.timedelta(days=6)),
        "sort by quantity": lambda p: p.locator(".sort-by select").select_option(label="Quantity"),
    }


def filter_changes(page) -> list[float]:
    """Seconds of each filter change that showed its new count (`change`)."""
    timed = []
    for label, action in filter_steps().items():
        try:
            rows, charts = change(page, action)
            timed.append(rows)
            log(f"  {label}: rows {rows:.3f} s, charts {charts:.3f} s")
        except Exception as error:  # a step that shows no change is reported, not fatal
            log(f"  {label}: {type(error).__name__}: {str(error).splitlines()[0]}")
    return timed


def explorer_figures(records: int, folder: Path) -> list[Figure]:
    """The explorer's figures on a fresh demo store of `records` records in `folder`."""
    with stage("explorer", f"a demo store of {records:,} records and its buyer's views"):
        env, payload = build_demo(folder, records)
    colds: list[tuple[float, float]] = []
    server = None
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for _ in range(COLD_RUNS):  # the last process goes on with the filter changes
                if server is not None:
                    page.context.close()
                    server.stop()
                server = start_explorer(env, folder)
                log(f"  explorer answering {server.ready_s:.1f} s after start; signing in")
                page, cold, cold_charts = sign_in(browser, server.base_url, payload["api_key"])
                colds.append((cold, cold_charts))
                log(f"  first view cold: {cold:.3f} s (charts {cold_charts:.3f} s)")
            timed = filter_changes(page)
            page.context.close()
            page, warm, _ = sign_in(browser, server.base_url, payload["api_key"])
            page.context.close()
            browser.close()
        rss = rss_mib(server.pid)
    finally:
        if server is not None:
            server.stop()
    section = "Explorer at store size"
    median, slowest = ([round(f(timed), 3)] if timed else [] for f in (statistics.median, max))  # none if all failed
    return [
        Figure("explorer.scale.first_view", section, f"first view, cold (median of {COLD_RUNS} fresh explorer processes)",
               "s", [round(c, 3) for c, _ in colds], Target("<=", 2.0)),
        Figure("explorer.scale.first_view_warm", section, "first view, warm (a later sign-in)", "s", [round(warm, 3)]),
        Figure("explorer.scale.charts", section, "both charts drawn after sign-in, cold", "s",
               [round(statistics.median(c for _, c in colds), 3)]),
        Figure("explorer.scale.filter_median", section, "filter change to the new count on screen: median of 8", "s",
               median, Target("<=", 1.0)),
        Figure("explorer.scale.filter_max", section, "filter change: the slowest of 8", "s",
               slowest, Target("<=", 1.0)),
        Figure("explorer.scale.rss", section, "explorer process RSS after the changes", "MiB", [round(rss, 1)]),
    ]


def _date(page, name: str, day: dt.date) -> None:
    box = page.locator(f".filter-{name} input").first
    box.fill(f"{day:%Y-%m-%d}")
    box.press("Enter")


def main(argv: list[str] | None = None) -> int:
    parser = command("explorer", __doc__)
    parser.add_argument("--records", type=int, nargs="+", default=[250_000, 1_000_000])
    args = parser.parse_args(argv)
    for records in args.records:
        run = Run("explorer", args.results, argv)
        with tempfile.TemporaryDirectory(prefix=f"lineups-explorer-{records}-") as folder:
            run.save(explorer_figures(records, Path(folder)), records)
    return 0
