"""What the explorer's browser tests share: Debian's chromium driven by Playwright
(never a downloaded browser), `lineups serve` (the API and the explorer) over the
default demo data set, and helpers that act as a buyer would.

The fixtures are imported by the browser test modules (`from browsing import …`), so
that each module gets its own server (module scope).
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import requests

from store.database.db import create_schema, engine_for, make_sessionmaker, transaction

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]
REPO = Path(__file__).resolve().parents[2]
#: Screenshots go to docs/ only when asked (`LINEUPS_SCREENSHOTS=docs/screenshots`),
#: so that running the suite does not rewrite tracked files.
_ASKED = os.environ.get("LINEUPS_SCREENSHOTS")
SHOTS = Path(_ASKED) if _ASKED else Path(tempfile.gettempdir()) / "lineups-screenshots"
DEMO_RECORDS = 5000  # what `lineups serve --demo` loads
#: The demo's calls are placed around today, as `lineups serve --demo` places them: the
#: explorer opens on calls from today on, so a fixed day would empty it as time passes.
ANCHOR = dt.datetime.now(dt.timezone.utc).date()
SECRET = "browser-test-secret-of-at-least-32-characters"
VIEWPORT = {"width": 1400, "height": 900}
NARROW = {"width": 800, "height": 900}


def chromium_or_skip() -> None:
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium", pytrace=False)
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)", allow_module_level=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    """`lineups serve` on a free port over a SQLite store."""

    def __init__(self, db_url: str, folder: Path, port: int | None = None):
        """`port`: that one (a server started again where another was), else a free one."""
        self.port = port or free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = folder / f"server-{self.port}-{time.monotonic_ns()}.log"
        self._log = open(self.log_path, "w")
        env = {**os.environ, "LINEUPS_SECRET": SECRET}
        # `lineups serve`, the API beside the explorer: the CSV download is the API's
        # (issue 49 item 5).
        self.process = subprocess.Popen(
            [sys.executable, "-c", "from cli.main import main; main()", "serve", "--db", db_url,
             "--port", str(self.port), "--base-url", self.base_url],
            cwd=REPO, env=env, stdout=self._log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(f"{self.base_url}/explorer/login", timeout=2).status_code == 200:
                    break
            except requests.RequestException:  # not listening yet, or still starting up
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the explorer did not start:\n{self.log()}")
            time.sleep(0.2)

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        self._log.close()


def served_store(tmp_path_factory):
    """A SQLite store with the default demo data and the demo buyer's views built, as
    `lineups serve --demo` leaves it (`cli.demo.run_demo`): (db URL, demo dict,
    sessionmaker, engine, folder). Without the views, the first sign-in and the first
    `by_source` page would each build one, which no buyer of a served store meets."""
    from store.intake.demo import load_demo
    from store.settings import Settings
    from store.views import builds

    folder = tmp_path_factory.mktemp("explorer")
    settings = Settings(db_url=f"sqlite:///{folder / 'lineups.db'}", secrets=(SECRET,))
    engine = engine_for(settings)
    create_schema(engine)
    sessions = make_sessionmaker(engine)
    with transaction(sessions) as session:
        demo = load_demo(session, DEMO_RECORDS, seed=7, anchor=ANCHOR)
    builds.ensure_buyer(sessions, demo["buyer_id"])
    return settings.db_url, demo, sessions, engine, folder


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """`lineups serve` over a SQLite store with the default demo data: yields
    `{"base_url", "api_key", "buyer_id", "sessions", "server", "db_url", "folder"}`."""
    db_url, demo, sessions, engine, folder = served_store(tmp_path_factory)
    server = Server(db_url, folder)
    try:
        yield {
            "base_url": server.base_url, "api_key": demo["api_key"], "buyer_id": demo["buyer_id"],
            "sessions": sessions, "server": server, "db_url": db_url, "folder": folder,
        }
    finally:
        server.stop()
        engine.dispose()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def new_page(browser, served, viewport=VIEWPORT):
    from playwright.sync_api import expect

    context = browser.new_context(viewport=viewport, accept_downloads=True)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=served["base_url"])
    page = context.new_page()
    page.set_default_timeout(45_000)
    # Expectations wait as long as actions: on a busy 2-core machine a redraw can take seconds.
    expect.set_options(timeout=45_000)
    return page


@pytest.fixture
def page(browser, served):
    page = new_page(browser, served)
    yield page
    page.context.close()


def shot(page, name: str, full_page: bool = True) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.wait_for_timeout(400)  # let Bokeh finish painting the canvases
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=full_page)


def sign_in(page, served, path: str = "/explorer", key: str | None = None, rows: bool = True) -> float:
    """Open `path`, sign in through the form; returns seconds from submitting it to
    the first table rows on screen (with `rows=False`: to the row count)."""
    page.goto(f"{served['base_url']}{path}")
    page.wait_for_selector("#api_key")
    page.fill("#api_key", key or served["api_key"])
    started = time.perf_counter()
    page.click("button[type=submit]")
    # Generous: on a shared 2-core machine under load a cold first view has taken 20 s.
    try:
        page.locator(".lineups-table .tabulator-row" if rows else ".lineups-table").first.wait_for(state="visible", timeout=45_000)
    except Exception as error:
        pytest.fail(f"no rows on screen after signing in to {path}: {error}\n{page_state(page, served)}", pytrace=False)
    return time.perf_counter() - started


#: Each table's rows in its model and in Tabulator, and whether it is being built.
_TABLES = """() => {
  const out = []
  for (const root of Object.values(window.Bokeh?.index ?? {}))
    for (const v of root.owner.query((v) => v.tabulator !== undefined))
      out.push({classes: v.model.css_classes, model_rows: v.model.source.get_length(),
                tabulator_rows: v.tabulator?.getDataCount(), built: v.tabulator?.initialized,
                building: v._building, initializing: v._initializing})
  return out
}"""


def page_state(page, served) -> str:
    """What a failed wait saw: the row count on screen, the tables, the server's log."""
    try:
        counts = page.locator(".row-count p").all_inner_texts()
        tables = page.evaluate(_TABLES)
    except Exception as error:  # the page itself is gone
        counts, tables = [], f"(page unreadable: {error})"
    server = served.get("server")
    log = server.log()[-3000:] if server is not None else ""
    return f"row count on screen: {counts}\ntables: {tables}\nserver log (end):\n{log}"


def open_tab(page, name: str) -> None:
    page.locator(".bk-tab", has_text=name).first.click()


def row_count(page) -> str:
    return page.locator(".row-count p").first.inner_text()


def rows_shown(page) -> int:
    """The number of rows the count above the table gives."""
    return int(row_count(page).split(" ", 1)[0].replace(",", ""))


def described(count_line: str) -> str:
    """The filters that the count line above the table names ("29 rows · Port BRSSZ ·
    latest call …" → "Port BRSSZ · latest call …"): without the count, the note of
    rows that look like duplicates (read after the rows, so it joins the line later)
    and "updating…"."""
    text = count_line.split("\n", 1)[0]
    text = text.split(" · ", 1)[1] if " · " in text else ""
    for tail in (" · ⚠", " · updating"):
        text = text.split(tail, 1)[0]
    return text.strip()


def change_filter(page, change, timeout_s: float = 45.0) -> float:
    """Apply `change` (a function of the page) and return seconds until the rows of
    the new filters are on screen: the count line names other filters than before
    and is no longer updating. (Not "until the line changes": the duplicates note
    joins it after the rows, and a change that keeps the count would then look done
    before its rows came: a flaky wait, seen on 2026-11-29 when by_source and merged
    rows of one filter counted the same.)"""
    before = described(row_count(page))
    started = time.perf_counter()
    change(page)
    while True:
        line = row_count(page)
        if "updating" not in line and "Loading" not in line and described(line) != before:
            return time.perf_counter() - started
        if time.perf_counter() - started > timeout_s:
            raise AssertionError(f"the count line still names the filters of before the change: {line!r}")
        page.wait_for_timeout(15)


def pick_commodity(page, name: str) -> None:
    """Type the start of a commodity's name and pick it from the suggestions."""
    box = page.locator(".filter-commodity input").first
    box.click()
    box.press_sequentially(name[:4])
    page.locator(".filter-commodity .bk-menu div", has_text=f"{name} ·").first.click()


def type_date(page, name: str, text: str) -> None:
    """Type (or, with "", clear) a date filter and press Enter."""
    box = page.locator(f".filter-{name} input").first
    box.fill(text)
    box.press("Enter")


def column_texts(page, field: str) -> list[str]:
    return page.locator(f".lineups-table .tabulator-row [tabulator-field={field}]").all_inner_texts()


#: Bokeh's view of the chart titled `title`, or null (a script function).
_PLOT = """(title) => {
  const views = [];
  const walk = (v) => { if (!v) return; views.push(v); for (const c of (v.child_views || [])) walk(c); };
  for (const v of Object.values(Bokeh.index)) walk(v);
  return views.find(v => v.model && v.model.title && v.model.title.text === title) || null;
}"""
#: The screen position of one bar of a chart (by its title), its factor (week or port),
#: layer (group or status) and the amount its tooltip shows: from Bokeh's own views,
#: so that the mouse goes where the bar is drawn.
_BAR = """([title, index]) => {
  const plot = (""" + _PLOT + """)(title);
  if (!plot) return null;
  const data = plot.model.renderers[0].data_source.data;
  if (!data.start || data.start.length <= index) return null;
  const across = 'port' in data;
  const middle = (data.start[index] + data.end[index]) / 2;
  const factor = across ? data.port[index] : data.week[index];
  const frame = plot.frame;
  const x = across ? frame.x_scale.compute(middle) : frame.x_scale.compute(frame.x_range.synthetic(factor));
  const y = across ? frame.y_scale.compute(frame.y_range.synthetic(factor)) : frame.y_scale.compute(middle);
  const box = plot.canvas_view.el.getBoundingClientRect();
  return {x: box.left + x, y: box.top + y, factor, layer: across ? data.status[index] : data.group[index], value: data.value[index]};
}"""
_TOOLTIP = """() => {
  const out = [];
  const walk = (root) => {
    for (const el of root.querySelectorAll('*')) {
      const name = (el.className || '').toString();
      if (name.includes('bk-tooltip-row-label') || name.includes('bk-tooltip-row-value')) out.push(el.textContent.trim());
      if (el.shadowRoot) walk(el.shadowRoot);
    }
  };
  walk(document);
  return out;
}"""


def bar(page, title: str, index: int = 0) -> dict:
    """Where bar `index` of the chart titled `title` is on screen (scrolled into view
    first), with its factor, layer and value; waits until the chart has that bar."""
    page.wait_for_function(f"() => {{ const f = {_BAR}; return f([{title!r}, {index}]) !== null; }}")
    where = page.evaluate(_BAR, [title, index])
    page.evaluate("(dy) => window.scrollBy(0, dy)", where["y"] - page.viewport_size["height"] / 2)
    page.wait_for_timeout(200)
    return page.evaluate(_BAR, [title, index])


def until_chart_factors_end_with(page, title: str, suffix: str) -> None:
    """Wait until every bar of the chart titled `title` has a factor (port or week)
    ending with `suffix`: the charts follow the rows (their totals are read after
    them), so a chart read as soon as the row count changed may still be the last
    filter's, and a click on it lands on a bar that moves."""
    page.wait_for_function(_FACTORS_END_WITH, arg=[title, suffix])


#: Whether every bar of the chart titled `title` has a factor ending with `suffix`.
_FACTORS_END_WITH = """([title, suffix]) => {
  const plot = (""" + _PLOT + """)(title);
  if (!plot) return false;
  const data = plot.model.renderers[0].data_source.data;
  const factors = 'port' in data ? data.port : data.week;
  return factors.length > 0 && Array.from(factors).every(f => String(f).endsWith(suffix));
}"""


def tooltip(page, at: dict) -> dict[str, str]:
    """Hover the mouse at `at` and read the chart tooltip shown there: {label: value}."""
    page.mouse.move(at["x"] - 2, at["y"] - 2)
    page.mouse.move(at["x"], at["y"])
    page.wait_for_function(f"() => {{ const f = {_TOOLTIP}; return f().length > 0; }}")
    texts = page.evaluate(_TOOLTIP)
    return {label.rstrip(":"): value for label, value in zip(texts[::2], texts[1::2])}
